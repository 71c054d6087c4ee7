#!/usr/bin/env bash
# Layer-major prefill in slices (issue 6, reads across chunks): one prompt cut
# in slices of CHUNK rows, with a cache that holds one layer's union of
# experts but not the prompt's, three arms in one session, alternated REPS
# times so drift hits them alike:
#   layer-major  --prefill-chunk CHUNK            (one group: a layer's slices in a row)
#   chunk-major  --prefill-chunk CHUNK --prefill-group CHUNK
#                                                 (each chunk through all layers, the old order)
#   one-slice    --prefill-chunk 0                (the whole prompt as one slice)
# Reported: TTFT, bytes read, read amplification (bytes read / unique expert
# bytes the prompt needs). Needs root and fio, like run.sh.
#
#   sudo bench/prefill/slices.sh [N=2] [MBPS=400] [MEM=2200M] [CACHE_GB=1.2]
#   environment: LENGTHS ("128 512"), CHUNK (128), REPS (1), THREADS (2), LOOKAHEAD (auto)
set -euo pipefail
N=${1:-2}
MBPS=${2:-400}
MEM=${3:-2200M}
CACHE_GB=${4:-1.2}
# shellcheck source=SCRIPTDIR/../lib.sh
source "$(dirname "$0")/../lib.sh"
LENGTHS=${LENGTHS:-128 512}
CHUNK=${CHUNK:-128}
REPS=${REPS:-1}
THREADS=${THREADS:-2}
LOOKAHEAD=${LOOKAHEAD:-auto}
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-prefill-slices
mkdir -p "$OUT" "$WORK"

bench_prefill_store "$N" "$MBPS" "$MEM" "$OUT"

arm() {  # name, prompt ids, extra options...
  local name=$1 prompt=$2; shift 2
  rm -f "$WORK/prefill-store/heat.json"  # every arm starts alike
  "$RIG/in-cgroup.sh" --mem "$MEM" --stats "$OUT/cgroup-$name.txt" -- "$DF" run --store "$WORK/prefill-store" \
      --prompt-ids "$prompt" --max-new 1 --stats --cache-gb "$CACHE_GB" --lookahead "$LOOKAHEAD" --threads "$THREADS" \
      --stats-json "$OUT/$name.json" "$@" >"$OUT/$name.log" 2>&1
}
for ((r = 1; r <= REPS; r++)); do
  for P in $LENGTHS; do
    prompt=$(bench_prompt_ids "$P")
    arm "layer-major-$P-$r" "$prompt" --prefill-chunk "$CHUNK"
    arm "chunk-major-$P-$r" "$prompt" --prefill-chunk "$CHUNK" --prefill-group "$CHUNK"
    arm "one-slice-$P-$r" "$prompt" --prefill-chunk 0
  done
done
"$RIG/drives-down.sh" >/dev/null || true
trap - EXIT
{
  echo "command: bench/prefill/slices.sh $N $MBPS $MEM $CACHE_GB (LENGTHS='$LENGTHS' CHUNK=$CHUNK REPS=$REPS THREADS=$THREADS LOOKAHEAD=$LOOKAHEAD)"
  python3 "$ROOT/bench/prefill/slices_table.py" "$OUT" "$LENGTHS" "$REPS"
} | tee "$OUT/table.md"
