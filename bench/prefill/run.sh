#!/usr/bin/env bash
# Expert-major prefill benchmark (issue 6): time to first token for prompts of
# 16, 128 and 512 tokens on the bench checkpoint (real K3 expert size), streamed
# from N throttled drives under a memory cap, beside
#   - token-by-token prefill of the same prompt (--prefill-chunk 1 --prefill-group 1) in the same
#     session: all of it for 16 tokens, the first TBT_PREFIX positions for longer
#     prompts (scaled to the prompt; labelled "extrapolated" in the table);
#   - the same prompt with every expert resident in RAM (no cap): the compute
#     bound, measured with the batched kernels this binary runs;
#   - fio on the same drives: the I/O bound = unique expert bytes / fio bandwidth.
# Needs root (../shared/bench: loop drives, blkio throttle, memory cgroup) and fio.
#
#   sudo bench/prefill/run.sh [N=2] [MBPS=400] [MEM=1800M] [CACHE_GB=1.0]
#   environment: THREADS (default 2), LOOKAHEAD (default auto), LENGTHS ("16 128 512"),
#                TBT_PREFIX (default 32), CHUNK (expert-major slice, default 0 = whole prompt),
#                GROUP (positions per layer-major pass, default 0 = by memory),
#                ARCH (k3 or qwen3_moe: the bench checkpoint's family, bench/lib.sh)
set -euo pipefail
N=${1:-2}
MBPS=${2:-400}
MEM=${3:-1800M}
CACHE_GB=${4:-1.0}
# shellcheck source=SCRIPTDIR/../lib.sh
source "$(dirname "$0")/../lib.sh"
THREADS=${THREADS:-2}
LOOKAHEAD=${LOOKAHEAD:-auto}
LENGTHS=${LENGTHS:-16 128 512}
TBT_PREFIX=${TBT_PREFIX:-32}
CHUNK=${CHUNK:-0}
GROUP=${GROUP:-0}
[ "$ARCH" != k3 ] && SUFFIX=${SUFFIX:--$ARCH}
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-prefill${SUFFIX:-}
mkdir -p "$OUT" "$WORK"

bench_prefill_store "$N" "$MBPS" "$MEM" "$OUT"

stream() {  # name, ids, extra options...
  local name=$1 prompt=$2; shift 2
  "$RIG/in-cgroup.sh" --mem "$MEM" --stats "$OUT/cgroup-$name.txt" -- "$DF" run --store "$WORK/prefill-store" \
      --prompt-ids "$prompt" --max-new 1 --stats --cache-gb "$CACHE_GB" --lookahead "$LOOKAHEAD" --threads "$THREADS" \
      --stats-json "$OUT/$name.json" "$@" >"$OUT/$name.log" 2>&1
}
for P in $LENGTHS; do
  prompt=$(bench_prompt_ids "$P")
  stream "expert-major-$P" "$prompt" --prefill-chunk "$CHUNK" --prefill-group "$GROUP"
  tbt=$P
  ((P > TBT_PREFIX)) && tbt=$TBT_PREFIX
  stream "token-by-token-$P" "$(bench_prompt_ids "$tbt")" --prefill-chunk 1 --prefill-group 1
  # Compute bound: every expert resident (no cap: the bench bank is 5.6 GB).
  "$DF" run --model "$CKPT" --prompt-ids "$prompt" --max-new 1 --stats --threads "$THREADS" --prefill-chunk "$CHUNK" \
      >"$OUT/resident-$P.log" 2>&1
done
"$RIG/drives-down.sh" >/dev/null || true
trap - EXIT
{
  echo "command: bench/prefill/run.sh $N $MBPS $MEM $CACHE_GB (THREADS=$THREADS LOOKAHEAD=$LOOKAHEAD LENGTHS='$LENGTHS' TBT_PREFIX=$TBT_PREFIX CHUNK=$CHUNK GROUP=$GROUP)"
  python3 "$ROOT/bench/prefill/table.py" "$OUT" "$CKPT/config.json" "$LENGTHS"
} | tee "$OUT/table.md"
