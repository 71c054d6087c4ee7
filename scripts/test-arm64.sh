#!/usr/bin/env bash
# ARM64 checks under qemu-user, after scripts/build.sh release and
# scripts/build.sh arm64 (scripts/test.sh runs all three):
#   1. the kernel, util (CRC32C), model and forward-pass tests of the
#      cross-built binaries, run under qemu-aarch64 (NEON and scalar: the
#      cross-ISA tests iterate every path the build has);
#   2. logits across machines: a tiny K3, Qwen3-MoE, DeepSeek V3 (FP8) and
#      Kimi K2-Thinking (INT4 experts) checkpoint
#      made by the x86-64 build, `deltafin logits` on x86-64 (scalar, AVX2,
#      AVX-512 where this CPU has them) and on arm64 under qemu (NEON,
#      scalar), and the .npy files compared with cmp: identical byte for byte.
# Exit status: non-zero at the first failure. Takes about a minute on a
# 2-core machine (the K3 forward tests are most of it).
set -euo pipefail
cd "$(dirname "$0")/.."
x86=build/release/deltafin
arm=build/arm64
# The loader and libc of libc6:arm64 (multiarch, pulled in by the arm64 -dev
# packages) are at the standard paths, so qemu needs no -L (see
# cmake/toolchains/aarch64-linux-gnu.cmake).
qemu=(qemu-aarch64)
for f in "$x86" "$arm/deltafin"; do
  [ -x "$f" ] || { echo "test-arm64: $f is missing (scripts/build.sh release, scripts/build.sh arm64)" >&2; exit 2; }
done

echo "== arm64 tests under qemu-aarch64 =="
# Every test of these binaries runs but Isa.EnvironmentVariableIsHonoured: it
# starts a child copy of the test binary through a shell, and without
# binfmt_misc the host cannot start an arm64 program (under qemu the child's
# /proc/PID/exe is qemu itself). tests/kernels/isa_test.cpp's other tests
# cover DELTAFIN_ISA's parsing. And test_util's
# WeightMemory.LargeBuffersAreHugePageAligned checks that the host kernel
# backed a buffer with transparent huge pages: qemu-user accepts the
# program's MADV_HUGEPAGE without passing it on, so it cannot hold there (its
# alignment half is also WeightMemory.SmallBuffersTakeTheAskedAlignment's).
# qemu-user runs a process on one core, so each binary runs as one GoogleTest
# shard per core at once (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX: every case
# in exactly one shard); a failing shard's output is printed.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shards=$(nproc)
start=$SECONDS
run_tests() {
  local bin=$1 filter=$2 t0=$SECONDS i n failed=0 passed=0 pids=()
  echo "-- $bin ${filter:+(--gtest_filter=$filter)}"
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "${qemu[@]}" "$arm/tests/$bin" --gtest_brief=1 \
      ${filter:+--gtest_filter="$filter"} >"$tmp/$bin.$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < shards; i++)); do
    if wait "${pids[i]}"; then
      n=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' "$tmp/$bin.$i.log")
      passed=$((passed + ${n:-0}))
    else
      failed=1
      cat "$tmp/$bin.$i.log"
    fi
  done
  echo "   $bin: $passed tests passed in $((SECONDS - t0)) s ($shards shards)"
  return $failed
}
run_tests test_kernels "-Isa.EnvironmentVariableIsHonoured"
run_tests test_util "-WeightMemory.LargeBuffersAreHugePageAligned"
run_tests test_model_common ""
run_tests test_kimi_k3 ""
run_tests test_qwen3 ""
run_tests test_qwen3_moe ""
echo "arm64 tests: $((SECONDS - start)) s"

echo "== logits: x86-64 and arm64 must agree byte for byte =="
tokens=$(seq -s, 1 24)
# logits_all NAME: every path's logits into $tmp/NAME-MACHINE-ISA.npy;
# prints the files written.
logits_all() {
  local name=$1 isa out
  for isa in scalar avx2 avx512; do
    out="$tmp/$name-x86-$isa.npy"
    if ! DELTAFIN_ISA=$isa "$x86" logits --model "$tmp/$name" --tokens "$tokens" --out "$out" \
         >/dev/null 2>"$tmp/err"; then
      grep -q "does not support" "$tmp/err" && continue  # not on this CPU
      cat "$tmp/err" >&2; return 1
    fi
    echo "$out"
  done
  for isa in neon scalar; do
    out="$tmp/$name-arm64-$isa.npy"
    if ! DELTAFIN_ISA=$isa "${qemu[@]}" "$arm/deltafin" logits \
         --model "$tmp/$name" --tokens "$tokens" --out "$out" >/dev/null 2>"$tmp/err"; then
      cat "$tmp/err" >&2; return 1
    fi
    echo "$out"
  done
}
# same FILE...: whether every file equals the first, byte for byte.
same() {
  local first=$1 f; shift
  for f in "$@"; do cmp -s "$first" "$f" || return 1; done
}
names() { local f; for f in "$@"; do f=${f##*/}; f=${f%.npy}; printf '%s ' "${f#*-}"; done; }
# Every path on both machines must give the same bytes. (The forward pass's
# expf and tanhf are deltafin's own, src/kernels/portable_math.h: glibc's
# tanhf differs between x86-64 and arm64, so with it K3's logits did not.)
compare_family() {
  local name=$1; shift
  local t0=$SECONDS
  "$x86" make-model --out "$tmp/$name" --seed 7 --force --quiet "$@" >/dev/null
  logits_all "$name" >"$tmp/list"  # not < <(...): a failure there would go unnoticed
  mapfile -t all <"$tmp/list"
  same "${all[@]}" || { echo "FAIL $name: logits differ between paths or machines" >&2; return 1; }
  echo "$name: identical on $(names "${all[@]}")($(stat -c %s "${all[0]}") bytes each, $((SECONDS - t0)) s)"
}
compare_family k3 --preset tiny
compare_family qwen3_moe --arch qwen3_moe --preset tiny
# The DeepSeek-V3 family's FP8 (block-scaled spine and experts) and INT4
# experts (Kimi K2-Thinking) through every path of both machines.
compare_family deepseek_v3 --arch deepseek_v3 --preset tiny
compare_family kimi_k2_thinking --arch deepseek_v3 --flavor kimi_k2_thinking --preset tiny
echo "arm64 checks: $((SECONDS - start)) s in all"
