#!/usr/bin/env bash
# The whole suite, as CI runs it (.ci/run adds CI=true):
#   1. the release build (gcc) and every test in it (the backend-ops test
#      includes the Vulkan backend on lavapipe), then scripts/test-vulkan.sh:
#      every family's logits and generations on Vulkan against the CPU;
#   2. the sanitizer build (clang-14, ASan + UBSan) and every test in it;
#   3. the libFuzzer targets of that build, for a budget of FUZZ_SECONDS
#      (default 80) in all (scripts/fuzz.sh);
#   4. on x86-64, the ARM64 cross-build and its tests and the cross-machine
#      logits check under qemu (scripts/test-arm64.sh).
# Each step prints its wall time and the running total; the total is checked
# against CI's budget of 35 minutes on its 2-core machine (a warning, not a
# failure: the hard limit is CI's own). Exit status is the first failing step's.
set -euo pipefail
cd "$(dirname "$0")/.."
budget_s=$((35 * 60))
step() {
  local name=$1 t0=$SECONDS
  shift
  echo "== $name =="
  "$@"
  echo "== $name: $((SECONDS - t0)) s (total $SECONDS s) =="
}
# ctest runs one process per test suite (tests/support/discover_suites.cmake);
# many suites wait on fsync, child processes and sockets, so one more job
# than cores keeps both cores busy.
jobs=$(( $(nproc) + 1 ))
asan_ctest() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build/asan --output-on-failure -j "$jobs"
}
step "install dependencies" scripts/install-deps.sh
step "build: release" scripts/build.sh release
step "tests: release build" ctest --test-dir build/release --output-on-failure -j "$jobs"
step "Vulkan on lavapipe: logits and generation of every family against the CPU" scripts/test-vulkan.sh build/release
step "build: ASan + UBSan (clang), with the fuzz targets" scripts/build.sh asan
step "tests: ASan + UBSan build" asan_ctest
step "fuzz: requests, HTTP, checkpoint files, store manifest, mirror replies" scripts/fuzz.sh "${FUZZ_SECONDS:-80}"
# The cross-build and emulation need an x86-64 host (install-deps.sh installs
# the aarch64 toolchain and qemu-user there); an ARM64 host runs the NEON path
# natively in the tests above.
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  step "build: ARM64 (cross)" scripts/build.sh arm64
  step "ARM64: tests and logits under qemu-aarch64" scripts/test-arm64.sh
fi
if (( SECONDS > budget_s )); then
  echo "WARNING: the suite took $SECONDS s, over CI's budget of $budget_s s (35 minutes):" \
       "make something cheaper (README.md, 'What CI runs and what it costs')" >&2
else
  echo "== all steps: $SECONDS s of CI's budget of $budget_s s =="
fi
