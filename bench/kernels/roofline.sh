#!/usr/bin/env bash
# The kernels' roofline on this machine, one thread: every weight type's
# product at T = 1..64 rows beside the read bandwidth and the FMA peak
# measured in the same run. Prints a markdown table (bench/kernels/roofline.py)
# and keeps the raw JSON.
#   bench/kernels/roofline.sh OUT_DIR [BUILD_DIR]   (default build/release)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:?usage: $0 OUT_DIR [BUILD_DIR]}"
build="${2:-build/release}"
mkdir -p "$out"
ninja -C "$build" bench_kernels >/dev/null
isa_filter="${ROOFLINE_ISAS:-avx2|avx512}"
"$build/bench/bench_kernels" --benchmark_min_time="${ROOFLINE_MIN_TIME:-0.3}" \
  --benchmark_filter="^(peak/fma|membw/sum/($isa_filter)|batched/.*/($isa_filter))\$" \
  --benchmark_format=json --benchmark_out="$out/roofline.json" --benchmark_out_format=json >/dev/null
python3 bench/kernels/roofline.py "$out/roofline.json" | tee "$out/roofline.md"
