# shellcheck shell=bash
# What compare.sh (everything in RAM) and oversub.sh (a third of the model in
# RAM, the rest on throttled drives) share: llama.cpp's source, its CPU build,
# the K3 bench checkpoint and its GGUF conversion, and the lines that name the
# builds measured. Sourced after `set -euo pipefail` and after the caller has
# set ROOT, OUT and DF; everything of llama.cpp lives under $LLAMA_DIR, outside
# the tracked tree.
#
#   LLAMA_DIR [/tmp/llama]  NLC_VERSION [3.22.1]  JOBS [2]
#   CKPT [$LLAMA_DIR/ckpt/bench]  GGUF [$CKPT.gguf]
LLAMA_DIR=${LLAMA_DIR:-/tmp/llama}
NLC_VERSION=${NLC_VERSION:-3.22.1}
JOBS=${JOBS:-2}
CKPT=${CKPT:-$LLAMA_DIR/ckpt/bench}
GGUF=${GGUF:-$CKPT.gguf}
PY=/usr/bin/python3
BIN=$LLAMA_DIR/build/bin

say() { printf '== %s\n' "$*" >&2; }

llama_prerequisites() {
  [ -x "$DF" ] || { echo "build deltafin first: scripts/build.sh release" >&2; exit 1; }
  "$PY" -c 'import numpy, torch, tqdm' 2>/dev/null || {
    echo "the converter needs Debian's numpy, torch and tqdm: apt-get install python3-numpy python3-torch python3-tqdm" >&2
    exit 1
  }
  mkdir -p "$LLAMA_DIR"
}

# llama.cpp's source: the git bundle inside the npm package node-llama-cpp.
# Sets LLAMA_COMMIT, LLAMA_TAG, NLC_VER (read by the sourcing script).
# shellcheck disable=SC2034
llama_source() {
  if [ ! -f "$LLAMA_DIR/package/llama/gitRelease.bundle" ]; then
    say "fetching node-llama-cpp@$NLC_VERSION from npm"
    (cd "$LLAMA_DIR" && npm pack --silent "node-llama-cpp@$NLC_VERSION" >/dev/null &&
      tar xzf "node-llama-cpp-$NLC_VERSION.tgz")
  fi
  if [ ! -d "$LLAMA_DIR/src/.git" ]; then
    say "cloning llama.cpp from the bundle"
    git clone -q "$LLAMA_DIR/package/llama/gitRelease.bundle" "$LLAMA_DIR/src" 2>/dev/null
  fi
  LLAMA_COMMIT=$(git -C "$LLAMA_DIR/src" rev-parse HEAD)
  LLAMA_TAG=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$LLAMA_DIR/package/llama/llama.cpp.info.json")
  NLC_VER=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$LLAMA_DIR/package/package.json" | head -1)
}

# llama_build TARGET...: the default CPU build (no GPU backend, no curl), out of
# tree, of the targets whose binaries are missing (a first build takes tens of
# minutes on 2 cores; later calls only add what is new).
llama_build() {
  local t missing=()
  for t in "$@"; do [ -x "$BIN/$t" ] || missing+=("$t"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "building llama.cpp ${missing[*]} (CPU only, -j$JOBS)"
  local t0
  t0=$(date +%s)
  nice -n 15 cmake -S "$LLAMA_DIR/src" -B "$LLAMA_DIR/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >"$OUT/llama-cmake.log" 2>&1
  nice -n 15 cmake --build "$LLAMA_DIR/build" -j"$JOBS" --target "${missing[@]}" >"$OUT/llama-build.log" 2>&1
  say "llama.cpp built in $(($(date +%s) - t0)) s"
}

# The checkpoint (made with `make-model --arch k3 --preset bench`, plus
# MAKE_MODEL_ARGS, when $CKPT has none) and its lossless conversion (kimi-k3
# architecture, MXFP4 experts kept bit for bit).
llama_checkpoint() {
  if [ ! -f "$CKPT/config.json" ]; then
    say "making the bench checkpoint at $CKPT ${MAKE_MODEL_ARGS:-}"
    # shellcheck disable=SC2086  # MAKE_MODEL_ARGS is a list of options
    "$DF" make-model --arch k3 --preset bench ${MAKE_MODEL_ARGS:-} --out "$CKPT" --quiet
  fi
  if [ ! -f "$GGUF" ]; then
    say "converting $CKPT to $GGUF"
    nice -n 15 "$PY" "$ROOT/bench/llama_cpp/convert_k3.py" "$LLAMA_DIR/src" "$CKPT" "$GGUF.part" >"$OUT/convert.log" 2>&1
    mv "$GGUF.part" "$GGUF"
  fi
}

# The deltafin binary measured: path, sha256, build time, source commit and
# whether src/ had uncommitted changes. One line.
deltafin_build_line() {
  local bin=$1 dfdir dfrev
  dfdir=$(dirname "$bin")
  if dfrev=$(git -C "$dfdir" rev-parse --short HEAD 2>/dev/null); then
    git -C "$dfdir" diff --quiet HEAD -- :/src || dfrev="$dfrev + uncommitted src changes"
  else dfrev="not in a git tree"; fi
  echo "$bin (sha256 $(sha256sum "$bin" | cut -c1-12), built $(date -u -r "$bin" +%Y-%m-%dT%H:%MZ); source $dfrev)"
}
