# shellcheck shell=bash
# What the drive benchmarks (bench/prefill/*.sh, bench/streaming/run.sh, ...)
# share: paths, prerequisites, the throttled drives, fio on them and a fresh
# store over them. Sourced after `set -euo pipefail`; needs root
# (../shared/bench: loop drives, blkio throttle, memory cgroup) and fio.
#
#   ROOT   the repository          RIG   the rig's scripts (DFBENCH_RIG)
#   DF     the release binary      WORK  scratch space (DFBENCH_WORK)
#   CKPT   the bench checkpoint    ARCH  its family: k3 (default) or qwen3_moe
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RIG=${DFBENCH_RIG:-$ROOT/../shared/bench}
DF=$ROOT/build/release/deltafin
WORK=${DFBENCH_WORK:-/var/tmp/df}
ARCH=${ARCH:-k3}
if [ "$ARCH" = k3 ]; then CKPT=$WORK/bench; else CKPT=$WORK/bench-$ARCH; fi

# The binary, fio, and the bench checkpoint (made once): K3 expert dimensions
# (17.5 MB records), 5 MoE layers x 64 experts = 5.6 GB; or, ARCH=qwen3_moe,
# Qwen3-235B-A22B's expert (37.7 MB records), 4 MoE layers x 32 experts, top-8
# = 4.8 GB.
bench_prerequisites() {
  [ -x "$DF" ] || { echo "build first: scripts/build.sh release" >&2; exit 1; }
  command -v fio >/dev/null || { echo "fio is needed: apt-get install fio" >&2; exit 1; }
  [ -f "$CKPT/config.json" ] || "$DF" make-model --arch "$ARCH" --preset bench --out "$CKPT"
}

# bench_drives_up N MBPS: N loop drives throttled to MBPS each. Sets drives
# (their mount points) and, for `deltafin setup`, dlist (--drives) and mbps
# (--drive-mbps).
# shellcheck disable=SC2034  # mbps, dlist: read by the sourcing script
bench_drives_up() {
  local n=$1 rate=$2 i
  "$RIG/drives-up.sh" "$n" "$rate" >/dev/null
  drives=()
  for ((i = 0; i < n; i++)); do drives+=("/mnt/dfdrive$i"); done
  mbps=$(printf "$rate%.0s," $(seq "$n")); mbps=${mbps%,}
  dlist=$(IFS=,; echo "${drives[*]}")
}

# bench_fio MEM JSON ERR: fio on every drive at once, the pattern the reader
# uses (4 MB direct reads, queue depth 4 per drive), in a MEM memory cgroup;
# its JSON report to JSON, its stderr to ERR.
bench_fio() {
  local mem=$1 json=$2 err=$3 d
  local jobs=()
  for d in "${drives[@]}"; do
    jobs+=(--name="$(basename "$d")" --filename="$d/fio.dat" --size=3G)
    [ -f "$d/fio.dat" ] || fio --name=prep --filename="$d/fio.dat" --size=3G --rw=write --bs=4M --direct=1 >/dev/null
  done
  "$RIG/in-cgroup.sh" --mem "$mem" -- fio --rw=randread --bs=4M --iodepth=4 --ioengine=libaio --direct=1 \
      --time_based --runtime=15 --ramp_time=2 --group_reporting=0 --output-format=json "${jobs[@]}" \
      >"$json" 2>"$err"
}

# bench_fresh_store STORE: removes STORE and the experts any earlier setup
# left on the drives, for a new `deltafin setup`.
bench_fresh_store() {
  local d
  for d in "${drives[@]}"; do rm -rf "$d/deltafin-experts"; done
  rm -rf "$1"
}

# bench_prefill_store N MBPS MEM OUT: what every prefill benchmark starts
# with: the prerequisites, N drives of MBPS, fio on them (OUT/fio.json) and a
# fresh store of the bench checkpoint over them at $WORK/prefill-store
# (OUT/setup.log). The drives are taken down on exit (an EXIT trap).
bench_prefill_store() {
  local n=$1 rate=$2 mem=$3 out=$4
  bench_prerequisites
  trap '"$RIG/drives-down.sh" >/dev/null 2>&1 || true' EXIT
  bench_drives_up "$n" "$rate"
  bench_fio "$mem" "$out/fio.json" /dev/null
  bench_fresh_store "$WORK/prefill-store"
  "$DF" setup --from "$CKPT" --store "$WORK/prefill-store" --drives "$dlist" --drive-mbps "$mbps" --quiet \
      >"$out/setup.log" 2>&1
}

# bench_prompt_ids P: the prefill benchmarks' fixed prompt, P token ids
# (below the bench checkpoint's vocabulary: 300 .. 999 for K3's, fewer for a smaller one).
bench_prompt_ids() {
  python3 - "$1" "$CKPT/config.json" <<'PY'
import json, sys
n, c = int(sys.argv[1]), json.load(open(sys.argv[2]))
span = min(700, c.get("text_config", c)["vocab_size"] - 310)
print(",".join(str(300 + (i * 37) % span) for i in range(n)))
PY
}
