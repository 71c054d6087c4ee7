#!/usr/bin/env bash
# Installs, builds (Release, and Debug with ASan+UBSan) and runs the whole test
# suite under both builds, cross-builds for ARM64 and runs its kernel and model
# tests and the cross-machine logits check under qemu (scripts/test-arm64.sh),
# then fuzzes request validation, the HTTP parser and the files a downloaded
# checkpoint or a mirror hands over, 80 s in all (scripts/fuzz.sh).
# Exit status is the first failing step's.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall time, so CI's budget (under 60 minutes on 2 cores) can be
# watched step by step.
step() {
  local name=$1 t0=$SECONDS
  shift
  echo "== $name =="
  "$@"
  echo "== $name: $((SECONDS - t0)) s (total $SECONDS s) =="
}
asan_ctest() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build/asan --output-on-failure -j "$jobs"
}
jobs=$(nproc)
step "install dependencies" scripts/install-deps.sh
step "build: release" scripts/build.sh release
step "build: ASan + UBSan" scripts/build.sh asan
step "tests: release build" ctest --test-dir build/release --output-on-failure -j "$jobs"
# The cross-build and emulation need an x86-64 host (install-deps.sh installs
# the aarch64 toolchain and qemu-user there); an ARM64 host runs the NEON path
# natively in the tests above.
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  step "build: ARM64 (cross)" scripts/build.sh arm64
  step "ARM64: tests and logits under qemu-aarch64" scripts/test-arm64.sh
fi
step "tests: ASan + UBSan build" asan_ctest
step "fuzz: requests, HTTP, checkpoint files, store.json, mirror replies (80 s in all)" scripts/fuzz.sh 80
