#!/usr/bin/env bash
# Builds deltafin. Usage: scripts/build.sh [release|asan|arm64] [TARGET...]
# (default: release, every target; with TARGETs, only those and what they need)
#   release -> build/release  (gcc, optimised: what users run, and the tests)
#   asan    -> build/asan     (clang-14, AddressSanitizer + UndefinedBehaviorSanitizer:
#              the computing libraries at -O1, the rest and the tests at -O0,
#              and the libFuzzer targets that scripts/fuzz.sh runs; without
#              the Vulkan backend, whose driver (Mesa) is not ours to check)
#   arm64   -> build/arm64    (cross-built for 64-bit ARM Linux with Debian's
#              aarch64 toolchain; by default only what scripts/test-arm64.sh
#              runs: the deltafin binary and the kernel, model and forward-pass tests)
# The release and ARM64 builds compile the command's files as one (unity
# build: CLI11 is header-only and costs seconds in every file that includes
# it); the sanitizer build compiles every file alone, so a file that does not
# include what it uses still fails there.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
[ $# -gt 0 ] && shift
targets=("$@")
case "$kind" in
  release) cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELTAFIN_UNITY=ON ;;
  asan)
    # clang rather than gcc: it compiles this code base's sanitized Debug
    # build in about half the time, and only clang has libFuzzer.
    # Line tables rather than full debug info (-g): the sanitizers' reports
    # still name file and line for every frame, for ~15 % less compile time.
    CC=clang-14 CXX=clang++-14 cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_C_FLAGS_DEBUG=-gline-tables-only -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only \
      -DDELTAFIN_SANITIZE=ON -DDELTAFIN_FUZZ=ON -DDELTAFIN_UNITY=OFF -DDELTAFIN_VULKAN=OFF ;;
  arm64)
    # -O2 rather than Release's -O3: the same bits (no fast-math, no
    # contraction either way) for less compile time; the build runs in CI.
    # Google Benchmark has no arm64 package installed: leave bench/ out.
    cmake -S . -B build/arm64 -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELTAFIN_UNITY=ON \
      -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
      -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
      -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON -DDELTAFIN_VULKAN=OFF
    [ ${#targets[@]} -gt 0 ] || targets=(deltafin test_kernels test_util test_kimi_k3 test_model_common test_qwen3 test_qwen3_moe) ;;
  *) echo "usage: $0 [release|asan|arm64] [TARGET...]" >&2; exit 2 ;;
esac
ninja -C "build/$kind" ${DELTAFIN_BUILD_JOBS:+-j "$DELTAFIN_BUILD_JOBS"} "${targets[@]}"
