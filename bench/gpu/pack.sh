#!/usr/bin/env bash
# Packs the built deltafin with every shared library it loads (glibc's loader
# included) and the Vulkan loader into one archive that runs on another
# x86-64 Linux machine whatever its distribution: the GPU machine of
# bench/gpu/vulkan-gpu.sh, which may have neither Debian 12's libraries nor
# libvulkan1. Its GPU driver (the Vulkan ICD) stays the machine's own.
#   bench/gpu/pack.sh [BUILD_DIR] -> BUILD_DIR/gpu-pack.tar.xz
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
bin="$build/deltafin"
[ -x "$bin" ] || { echo "pack: no $bin (scripts/build.sh release deltafin)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/deltafin-pack/lib"
cp "$bin" "$stage/deltafin-pack/deltafin.bin"
# Every library ldd resolves, the loader itself, and libvulkan.so.1 (opened
# at run time, so ldd does not list it).
ldd "$bin" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | while read -r lib; do
  cp -L "$lib" "$stage/deltafin-pack/lib/"
done
vk=$(ldconfig -p | awk '/libvulkan.so.1 /{v = $NF} END {print v}')
[ -n "$vk" ] || { echo "pack: libvulkan.so.1 is not installed (apt-get install libvulkan1)" >&2; exit 1; }
cp -L "$vk" "$stage/deltafin-pack/lib/libvulkan.so.1"
cat > "$stage/deltafin-pack/deltafin" <<'WRAP'
#!/bin/sh
# deltafin through the packed loader and libraries (bench/gpu/pack.sh).
here=$(dirname "$(readlink -f "$0")")
exec "$here/lib/ld-linux-x86-64.so.2" --library-path "$here/lib" "$here/deltafin.bin" "$@"
WRAP
chmod +x "$stage/deltafin-pack/deltafin"
tar -C "$stage" -cJf "$build/gpu-pack.tar.xz" deltafin-pack
echo "pack: $build/gpu-pack.tar.xz ($(du -h "$build/gpu-pack.tar.xz" | cut -f1))"
