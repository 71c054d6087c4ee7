#!/usr/bin/env bash
# One prompt length, streamed expert-major prefill and the all-resident run
# (its compute bound) alternated REPS times (S R S R ...), so the TTFT / floor
# ratio is taken pair by pair while the shared machine's speed drifts (issue 6:
# the 128-token figure moved 1.33 -> 1.09 between two sequential sessions,
# mostly by the resident arm drifting). Needs root and fio, like run.sh.
#
#   sudo bench/prefill/ab.sh [N=2] [MBPS=400] [MEM=1800M] [CACHE_GB=1.0]
#   environment: P (prompt length, default 128), REPS (default 4), THREADS (2), LOOKAHEAD (auto)
set -euo pipefail
N=${1:-2}
MBPS=${2:-400}
MEM=${3:-1800M}
CACHE_GB=${4:-1.0}
# shellcheck source=SCRIPTDIR/../lib.sh
source "$(dirname "$0")/../lib.sh"
P=${P:-128}
REPS=${REPS:-4}
THREADS=${THREADS:-2}
LOOKAHEAD=${LOOKAHEAD:-auto}
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-prefill-ab-$P
mkdir -p "$OUT" "$WORK"

bench_prefill_store "$N" "$MBPS" "$MEM" "$OUT"

prompt=$(bench_prompt_ids "$P")
for ((r = 1; r <= REPS; r++)); do
  # Streamed, memory-capped; the store's heat is reset so every repetition starts alike.
  rm -f "$WORK/prefill-store/heat.json"
  "$RIG/in-cgroup.sh" --mem "$MEM" --stats "$OUT/cgroup-$r.txt" -- "$DF" run --store "$WORK/prefill-store" \
      --prompt-ids "$prompt" --max-new 1 --stats --cache-gb "$CACHE_GB" --lookahead "$LOOKAHEAD" --threads "$THREADS" \
      --stats-json "$OUT/streamed-$r.json" >"$OUT/streamed-$r.log" 2>&1
  "$DF" run --model "$CKPT" --prompt-ids "$prompt" --max-new 1 --stats --threads "$THREADS" \
      >"$OUT/resident-$r.log" 2>&1
done
"$RIG/drives-down.sh" >/dev/null || true
trap - EXIT
{
  echo "command: bench/prefill/ab.sh $N $MBPS $MEM $CACHE_GB (P=$P REPS=$REPS THREADS=$THREADS LOOKAHEAD=$LOOKAHEAD)"
  python3 "$ROOT/bench/prefill/ab_table.py" "$OUT" "$REPS"
} | tee "$OUT/table.md"
