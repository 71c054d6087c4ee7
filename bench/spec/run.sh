#!/usr/bin/env bash
# Speculative decoding on the bench checkpoint (issue 8): plain decoding, the
# oracle drafter (replays the plain run's tokens: every draft right, the upper
# bound) at k = 1..7 and adaptive, and n-gram, all streamed from N throttled
# drives under a memory cap, alternated within each repetition; then the same
# arms with every expert resident (compute-bound). Every arm's tokens must
# equal the plain run's (checked with cmp). Needs root and fio, like the
# other drive benchmarks.
#
#   sudo bench/spec/run.sh [N=2] [MBPS=400] [MEM=1800M] [CACHE_GB=1.0]
#   environment: NEW (tokens, default 32), REPS (1), THREADS (2), KS ("1 2 3 4 5 6 7"),
#                PARTS ("streamed resident"; "resident" alone needs neither root nor fio),
#                TAG (suffix of the results directory)
set -euo pipefail
N=${1:-2}
MBPS=${2:-400}
MEM=${3:-1800M}
CACHE_GB=${4:-1.0}
# shellcheck source=SCRIPTDIR/../lib.sh
source "$(dirname "$0")/../lib.sh"
NEW=${NEW:-32}
REPS=${REPS:-1}
THREADS=${THREADS:-2}
KS=${KS:-"1 2 3 4 5 6 7"}
PARTS=${PARTS:-"streamed resident"}
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-spec${TAG:-}
mkdir -p "$OUT" "$WORK"
[ -x "$DF" ] || { echo "build first: scripts/build.sh release" >&2; exit 1; }
[ -f "$CKPT/config.json" ] || "$DF" make-model --preset bench --out "$CKPT"

# 16 prompt tokens, a 4-token unit repeated: text an n-gram drafter can match.
prompt=$(python3 -c "print(','.join(str(t) for t in [301, 402, 503, 604] * 4))")
common=(--prompt-ids "$prompt" --max-new "$NEW" --ignore-eos --threads "$THREADS")
streamed() {  # streamed NAME ARGS...: one memory-capped, cold-cache run
  local name=$1; shift
  rm -f "$WORK/spec-store/heat.json"
  "$RIG/in-cgroup.sh" --mem "$MEM" --stats "$OUT/$name.cgroup" -- "$DF" run --store "$WORK/spec-store" "${common[@]}" \
      --cache-gb "$CACHE_GB" --stats --stats-json "$OUT/$name.json" --tokens-out "$OUT/$name.ids" "$@" \
      >"$OUT/$name.log" 2>&1
}
resident() {
  local name=$1; shift
  "$DF" run --model "$CKPT" "${common[@]}" --stats --stats-json "$OUT/$name.json" --tokens-out "$OUT/$name.ids" "$@" \
      >"$OUT/$name.log" 2>&1
}

# The oracle's recording: a plain run of the same prompt.
resident oracle-source --draft none
cp "$OUT/oracle-source.ids" "$OUT/oracle.ids"
if [[ " $PARTS " == *" streamed "* ]]; then
  bench_prerequisites
  trap '"$RIG/drives-down.sh" >/dev/null 2>&1 || true' EXIT
  bench_drives_up "$N" "$MBPS"
  bench_fio "$MEM" "$OUT/fio.json" /dev/null
  bench_fresh_store "$WORK/spec-store"
  "$DF" setup --from "$CKPT" --store "$WORK/spec-store" --drives "$dlist" --drive-mbps "$mbps" --quiet >"$OUT/setup.log" 2>&1
  for ((r = 1; r <= REPS; r++)); do
    streamed "plain-$r" --draft none
    for k in $KS; do streamed "oracle-k$k-$r" --draft "replay:$OUT/oracle.ids" --draft-k "$k"; done
    streamed "oracle-auto-$r" --draft "replay:$OUT/oracle.ids" --draft-k 0
    streamed "ngram-$r" --draft ngram
  done
  "$RIG/drives-down.sh" >/dev/null || true
  trap - EXIT
fi
if [[ " $PARTS " == *" resident "* ]]; then
  for ((r = 1; r <= REPS; r++)); do  # alternated as the streamed arms are
    resident "resident-plain-$r" --draft none
    for k in $KS; do resident "resident-oracle-k$k-$r" --draft "replay:$OUT/oracle.ids" --draft-k "$k"; done
    resident "resident-oracle-auto-$r" --draft "replay:$OUT/oracle.ids" --draft-k 0
  done
fi

for f in "$OUT"/*.ids; do
  cmp -s "$f" "$OUT/oracle.ids" || { echo "CORRECTNESS FAILURE: $f differs from the plain run's tokens" >&2; exit 1; }
done
{
  echo "command: bench/spec/run.sh $N $MBPS $MEM $CACHE_GB (NEW=$NEW REPS=$REPS THREADS=$THREADS KS=\"$KS\" PARTS=\"$PARTS\")"
  echo "every arm's tokens equal the plain run's (cmp of --tokens-out)"
  python3 "$ROOT/bench/spec/table.py" "$OUT" "$REPS" "$KS"
} | tee "$OUT/table.md"
