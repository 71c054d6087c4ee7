#!/usr/bin/env bash
# Expert-major prefill benchmark (issue 6): time to first token for prompts of
# 16, 128 and 512 tokens on the bench checkpoint (real K3 expert size), streamed
# from N throttled drives under a memory cap, beside
#   - token-by-token prefill of the same prompt (--prefill-chunk 1) in the same
#     session: all of it for 16 tokens, the first TBT_PREFIX positions for longer
#     prompts (scaled to the prompt; labelled "extrapolated" in the table);
#   - the same prompt with every expert resident in RAM (no cap): the compute
#     bound, measured with the batched kernels this binary runs;
#   - fio on the same drives: the I/O bound = unique expert bytes / fio bandwidth.
# Needs root (../shared/bench: loop drives, blkio throttle, memory cgroup) and fio.
#
#   sudo bench/prefill/run.sh [N=2] [MBPS=400] [MEM=1800M] [CACHE_GB=1.0]
#   environment: THREADS (default 2), LOOKAHEAD (default auto), LENGTHS ("16 128 512"),
#                TBT_PREFIX (default 32), CHUNK (expert-major chunk, default 0 = whole prompt)
set -euo pipefail
N=${1:-2}
MBPS=${2:-400}
MEM=${3:-1800M}
CACHE_GB=${4:-1.0}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RIG=${DFBENCH_RIG:-$ROOT/../shared/bench}
DF=$ROOT/build/release/deltafin
WORK=${DFBENCH_WORK:-/var/tmp/df}
CKPT=$WORK/bench
THREADS=${THREADS:-2}
LOOKAHEAD=${LOOKAHEAD:-auto}
LENGTHS=${LENGTHS:-16 128 512}
TBT_PREFIX=${TBT_PREFIX:-32}
CHUNK=${CHUNK:-0}
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-prefill${SUFFIX:-}
mkdir -p "$OUT" "$WORK"

[ -x "$DF" ] || { echo "build first: scripts/build.sh release" >&2; exit 1; }
command -v fio >/dev/null || { echo "fio is needed: apt-get install fio" >&2; exit 1; }
[ -f "$CKPT/config.json" ] || "$DF" make-model --preset bench --out "$CKPT"
trap '"$RIG/drives-down.sh" >/dev/null 2>&1 || true' EXIT

"$RIG/drives-up.sh" "$N" "$MBPS" >/dev/null
drives=()
for ((i = 0; i < N; i++)); do drives+=("/mnt/dfdrive$i"); done
jobs=()
for d in "${drives[@]}"; do
  jobs+=(--name="$(basename "$d")" --filename="$d/fio.dat" --size=3G)
  [ -f "$d/fio.dat" ] || fio --name=prep --filename="$d/fio.dat" --size=3G --rw=write --bs=4M --direct=1 >/dev/null
done
"$RIG/in-cgroup.sh" --mem "$MEM" -- fio --rw=randread --bs=4M --iodepth=4 --ioengine=libaio --direct=1 \
    --time_based --runtime=15 --ramp_time=2 --group_reporting=0 --output-format=json "${jobs[@]}" \
    >"$OUT/fio.json" 2>/dev/null

mbps=$(printf "$MBPS%.0s," $(seq "$N")); mbps=${mbps%,}
dlist=$(IFS=,; echo "${drives[*]}")
for d in "${drives[@]}"; do rm -rf "$d/deltafin-experts"; done
rm -rf "$WORK/prefill-store"
"$DF" setup --from "$CKPT" --store "$WORK/prefill-store" --drives "$dlist" --drive-mbps "$mbps" --quiet >"$OUT/setup.log" 2>&1

ids() { python3 -c "import sys; n=int(sys.argv[1]); print(','.join(str(300 + (i * 37) % 700) for i in range(n)))" "$1"; }
stream() {  # name, ids, extra options...
  local name=$1 prompt=$2; shift 2
  "$RIG/in-cgroup.sh" --mem "$MEM" --stats "$OUT/cgroup-$name.txt" -- "$DF" run --store "$WORK/prefill-store" \
      --prompt-ids "$prompt" --max-new 1 --stats --cache-gb "$CACHE_GB" --lookahead "$LOOKAHEAD" --threads "$THREADS" \
      --stats-json "$OUT/$name.json" "$@" >"$OUT/$name.log" 2>&1
}
for P in $LENGTHS; do
  prompt=$(ids "$P")
  stream "expert-major-$P" "$prompt" --prefill-chunk "$CHUNK"
  tbt=$P
  ((P > TBT_PREFIX)) && tbt=$TBT_PREFIX
  stream "token-by-token-$P" "$(ids "$tbt")" --prefill-chunk 1
  # Compute bound: every expert resident (no cap: the bench bank is 5.6 GB).
  "$DF" run --model "$CKPT" --prompt-ids "$prompt" --max-new 1 --stats --threads "$THREADS" --prefill-chunk "$CHUNK" \
      >"$OUT/resident-$P.log" 2>&1
done
"$RIG/drives-down.sh" >/dev/null || true
trap - EXIT
{
  echo "command: bench/prefill/run.sh $N $MBPS $MEM $CACHE_GB (THREADS=$THREADS LOOKAHEAD=$LOOKAHEAD LENGTHS='$LENGTHS' TBT_PREFIX=$TBT_PREFIX CHUNK=$CHUNK)"
  python3 "$ROOT/bench/prefill/table.py" "$OUT" "$CKPT/config.json" "$LENGTHS"
} | tee "$OUT/table.md"
