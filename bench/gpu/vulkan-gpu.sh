#!/usr/bin/env bash
# The Vulkan backend on a real GPU, in one short run (issue 36): on a machine
# lent for minutes (an NVIDIA H100/H200), from the repository's root:
#   bench/gpu/pack.sh                       # here: build/release/gpu-pack.tar.xz
#   bench/gpu/vulkan-gpu.sh OUT_DIR [PACK]  # there, with the pack carried along
# It records, under OUT_DIR:
#   machine.txt      the GPU and driver (nvidia-smi), the Vulkan ICDs present
#   devices.txt/json `deltafin devices --check`: the device, its float controls,
#                    the contract check (the CPU's bits, subnormals, fma)
#   identity.txt     scripts/test-vulkan.sh on the GPU: every family's logits
#                    and generations against the CPU, cmp; and the logits again
#                    with DELTAFIN_VULKAN_FMA=soft (the double-formed fma)
#   bench-*.txt/json decode and prefill tokens/s, resident in device memory,
#                    GPU against the machine's CPU (all its threads), on the
#                    small presets and, if it can be made in time, K3's bench
#                    preset (real expert size)
#   stream-*.txt     a streamed store on the machine's disk: tokens/s and the
#                    bytes staged per use (`--stats`)
#   summary.txt      the lines that go into bench/results
# QUICK=1 uses the tiny presets (a dry run on lavapipe). Each part has its own
# time limit; a part that fails is recorded and the rest still run.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/gpu/vulkan-gpu.sh OUT_DIR [PACK]}
pack=${2:-build/release/gpu-pack.tar.xz}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$pack" || { echo "no pack at $pack (bench/gpu/pack.sh)" | tee "$out/summary.txt"; exit 1; }
df="$work/deltafin-pack/deltafin"
mkdir -p "$work/bin" && ln -s "$df" "$work/bin/deltafin"
threads=$(nproc)
small=small
[ "${QUICK:-0}" = 1 ] && small=tiny
note() { echo "$*" | tee -a "$out/summary.txt"; }
part() {  # part NAME SECONDS COMMAND...: runs it with a time limit, output in OUT/NAME.txt
  local name=$1 limit=$2 t=$SECONDS
  shift 2
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  note "$name: exit $rc in $((SECONDS - t)) s"
  return $rc
}

{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "ICDs:"; ls -l /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1; } >"$out/machine.txt" 2>&1
note "machine: $(head -1 "$out/machine.txt"); $threads CPU threads"

part devices 120 "$df" devices --check || true
"$df" devices --check --json >"$out/devices.json" 2>/dev/null
cat "$out/devices.txt"
# The first GPU, else whatever device there is (lavapipe on a dry run).
device=$(awk -F': ' '/^[0-9]+: /{ if (!d || $0 ~ /GPU/) { split($1, a, " "); d = a[1]; if ($0 ~ /GPU/) exit } } END {print d}' "$out/devices.txt")
[ -n "$device" ] || { note "no Vulkan device: see devices.txt and machine.txt"; exit 1; }
export DELTAFIN_DEVICE=$device
note "device $device: $(grep "^$device: " "$out/devices.txt")"

part identity 240 scripts/test-vulkan.sh "$work/bin" "$work/identity" && note "identity: $(tail -1 "$out/identity.txt")"
soft_ok=1
for fam in "k3 --preset tiny" "q --arch qwen3_moe --preset tiny"; do
  set -- $fam; name=$1; shift
  "$df" logits --model "$work/identity/$name" --tokens "$(seq -s, 1 24)" --backend vulkan --out "$work/soft.npy" \
    >/dev/null 2>&1 </dev/null || soft_ok=0
  DELTAFIN_VULKAN_FMA=soft "$df" logits --model "$work/identity/$name" --tokens "$(seq -s, 1 24)" --backend vulkan \
    --out "$work/soft2.npy" >/dev/null 2>&1 || soft_ok=0
  cmp -s "$work/soft.npy" "$work/soft2.npy" || soft_ok=0
done
note "the device's fma against the double-formed one: $([ $soft_ok = 1 ] && echo identical logits || echo DIFFERENT or failed)"

bench_pair() {  # bench_pair NAME MODEL_ARGS...: GPU, then the CPU on all threads
  local name=$1
  shift
  part "bench-$name-vulkan" 150 "$df" bench "$@" --backend vulkan --runs 3 --warmup 1 --max-new 32 \
    --json "$out/bench-$name-vulkan.json"
  part "bench-$name-cpu" 150 "$df" bench "$@" --threads "$threads" --runs 3 --warmup 1 --max-new 32 \
    --json "$out/bench-$name-cpu.json"
  for arm in vulkan cpu; do
    note "bench $name $arm: $(awk '/^(decode|prefill)_tokens_per_s/{printf "%s %s; ", $1, $2}' "$out/bench-$name-$arm.txt")"
  done
}
for arch in kimi_k3 qwen3_moe; do
  "$df" make-model --arch "$arch" --preset "$small" --out "$work/$arch" --seed 7 --force --quiet >/dev/null 2>&1
  bench_pair "$arch-$small" --model "$work/$arch"
done
if [ "${QUICK:-0}" != 1 ] && part make-bench 150 "$df" make-model --arch kimi_k3 --preset bench --out "$work/k3-bench" --seed 7 --force --quiet; then
  bench_pair kimi_k3-bench --model "$work/k3-bench"
fi

# Streamed: the store on this machine's disk, experts staged per use.
mkdir -p "$work/d1"
"$df" setup --from "$work/kimi_k3" --store "$work/store" --drives "$work/d1" >/dev/null 2>&1
part stream-vulkan 120 "$df" run --store "$work/store" --backend vulkan --prompt-ids "$(seq -s, 1 64)" --max-new 32 --stats
part stream-cpu 120 "$df" run --store "$work/store" --threads "$threads" --prompt-ids "$(seq -s, 1 64)" --max-new 32 --stats
grep -hE "^decode|^load|^vulkan:" "$out/stream-vulkan.txt" "$out/stream-cpu.txt" >>"$out/summary.txt"
note "total $SECONDS s"
