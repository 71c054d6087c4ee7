#!/usr/bin/env bash
# Installs the Debian packages deltafin needs to build and test (Debian 12).
# Runs apt-get as root, through sudo when not root. Non-interactive.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      nlohmann-json3-dev libpcre2-dev libssl-dev libcli11-dev libgtest-dev libbenchmark-dev
      liburing-dev libcurl4-openssl-dev
      libicu-dev  # NFC normalisation for Hugging Face tokenizer.json (Qwen3 draft model)
      nginx  # the remote (HTTP) tests serve files from a real nginx as the mirror
      clang-14 libclang-rt-14-dev)  # clang + libFuzzer for scripts/fuzz.sh
# The tokenizer oracle test runs the real tiktoken (npm package) under Node.js.
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)

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
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
