#!/usr/bin/env bash
# Builds deltafin. Usage: scripts/build.sh [release|asan]   (default: release)
#   release -> build/release  (optimised, what users run)
#   asan    -> build/asan     (Debug + AddressSanitizer + UndefinedBehaviorSanitizer)
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
case "$kind" in
  release) cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release ;;
  asan)    cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDELTAFIN_SANITIZE=ON ;;
  *) echo "usage: $0 [release|asan]" >&2; exit 2 ;;
esac
ninja -C "build/$kind"
