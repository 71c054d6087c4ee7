#!/usr/bin/env bash
# Installs, builds (Release, and Debug with ASan+UBSan) and runs the whole test
# suite under both builds, cross-builds for ARM64 and runs its kernel and model
# tests and the cross-machine logits check under qemu (scripts/test-arm64.sh),
# then fuzzes request validation and the HTTP parser for a minute each
# (scripts/fuzz.sh).
# Exit status is the first failing step's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
scripts/build.sh release
scripts/build.sh asan
echo "== tests: release build =="
ctest --test-dir build/release --output-on-failure -j "$jobs"
# The cross-build and emulation need an x86-64 host (install-deps.sh installs
# the aarch64 toolchain and qemu-user there); an ARM64 host runs the NEON path
# natively in the tests above.
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  echo "== ARM64: cross-build, tests and logits under qemu-aarch64 =="
  scripts/build.sh arm64
  scripts/test-arm64.sh
fi
echo "== tests: ASan + UBSan build =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs"
echo "== fuzz: request validation and HTTP parsing (60 s each) =="
scripts/fuzz.sh 60
