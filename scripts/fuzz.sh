#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan) in build/fuzz and runs
# each for SECONDS (default 60): fuzz_request (request validation) and
# fuzz_http (the HTTP/1.x request parser), each from a copy of its seed
# corpus fuzz/corpus/<name> (the tracked corpus is never written). Exit
# status is non-zero when either found a crash, whose input it leaves in
# build/fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=build/fuzz

CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DDELTAFIN_FUZZ=ON -DBUILD_TESTING=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" fuzz_request fuzz_http
mkdir -p "$build/artifacts"

# Leaks are bugs too; UBSan aborts (the targets build with -fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for target in request http; do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  cp -f fuzz/corpus/$target/* "$corpus"/
  echo "== fuzz_$target ($seconds s) =="
  "$build/fuzz/fuzz_$target" -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 -dict=fuzz/$target.dict \
    -artifact_prefix="$build/artifacts/$target-" "$corpus" || status=$?
done
exit "$status"
