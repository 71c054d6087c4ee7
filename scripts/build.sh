#!/usr/bin/env bash
# Builds deltafin. Usage: scripts/build.sh [release|asan|arm64]   (default: release)
#   release -> build/release  (optimised, what users run)
#   asan    -> build/asan     (Debug + AddressSanitizer + UndefinedBehaviorSanitizer)
#   arm64   -> build/arm64    (cross-built for 64-bit ARM Linux with Debian's
#              aarch64 toolchain; only what scripts/test-arm64.sh runs: the
#              deltafin binary and the kernel, model and forward-pass tests)
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
case "$kind" in
  release) cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release ;;
  asan)    cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDELTAFIN_SANITIZE=ON ;;
  arm64)
    # -O2 rather than Release's -O3: the same bits (no fast-math, no
    # contraction either way) for less compile time; the build runs in CI.
    # Google Benchmark has no arm64 package installed: leave bench/ out.
    cmake -S . -B build/arm64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
      -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
      -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON
    ninja -C build/arm64 ${DELTAFIN_BUILD_JOBS:+-j "$DELTAFIN_BUILD_JOBS"} \
      deltafin test_kernels test_util test_model test_model_common test_qwen3
    exit 0 ;;
  *) echo "usage: $0 [release|asan|arm64]" >&2; exit 2 ;;
esac
ninja -C "build/$kind" ${DELTAFIN_BUILD_JOBS:+-j "$DELTAFIN_BUILD_JOBS"}
