#!/usr/bin/env bash
# Builds the libFuzzer target fuzz_request (clang-14, ASan + UBSan) in
# build/fuzz and fuzzes request validation for SECONDS (default 60), starting
# from a copy of the seed corpus fuzz/corpus/request (the tracked corpus is
# never written). Exit status is the fuzzer's: non-zero when it found a crash,
# whose input it leaves in build/fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=build/fuzz

CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DDELTAFIN_FUZZ=ON -DBUILD_TESTING=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" fuzz_request

corpus="$build/corpus/request"
mkdir -p "$corpus" "$build/artifacts"
cp -f fuzz/corpus/request/* "$corpus"/

# Leaks are bugs too; UBSan aborts (the targets build with -fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
"$build/fuzz/fuzz_request" -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 -dict=fuzz/request.dict \
  -artifact_prefix="$build/artifacts/" "$corpus" || status=$?
exit "$status"
