#!/usr/bin/env bash
# Installs the Debian packages deltafin needs to build and test (Debian 12).
# Runs apt-get as root, through sudo when not root. Non-interactive.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      nlohmann-json3-dev libpcre2-dev libssl-dev libcli11-dev libgtest-dev libbenchmark-dev
      liburing-dev libcurl4-openssl-dev
      libicu-dev  # NFC normalisation for Hugging Face tokenizer.json (Qwen3 draft model)
      nginx  # the remote (HTTP) tests serve files from a real nginx as the mirror
      # The Vulkan backend: headers and the shader compiler to build it, and
      # Mesa's drivers, whose lavapipe runs Vulkan on the CPU for its tests.
      libvulkan-dev glslc mesa-vulkan-drivers
      clang-14 libclang-rt-14-dev)  # the sanitizer build (scripts/build.sh asan) and libFuzzer
# The tokenizer oracle test runs the real tiktoken (npm package) under Node.js.
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
# ARM64 cross-build and its tests under emulation (scripts/build.sh arm64,
# scripts/test-arm64.sh), on x86-64 hosts: the aarch64 toolchain, qemu-user,
# and the arm64 multiarch builds of the libraries the built targets link
# (OpenSSL, PCRE2, ICU, libcurl, liburing, GoogleTest; nlohmann-json and CLI11
# are headers and come from the host packages above).
cross=()
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  pkgs+=(g++-aarch64-linux-gnu qemu-user)
  cross=(libssl-dev:arm64 libpcre2-dev:arm64 libicu-dev:arm64 libcurl4-openssl-dev:arm64
         liburing-dev:arm64 libgtest-dev:arm64)
  pkgs+=("${cross[@]}")
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The :arm64 packages need the architecture known to dpkg before apt's update.
if [ ${#cross[@]} -gt 0 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
