#!/usr/bin/env bash
# The Vulkan backend end to end, against the CPU, byte for byte (CI runs it
# on lavapipe, Mesa's Vulkan driver on the CPU; on a GPU machine it checks
# the GPU): scripts/test-vulkan.sh [BUILD_DIR] [WORKDIR]
# For each family's tiny checkpoint (Kimi K3, Qwen3-MoE, DeepSeek V3 with its
# FP8 experts; INT4 experts are in the backend-ops test): the logits of 24 positions at once and one by one,
# resident and streamed from a two-drive store, Vulkan against the CPU
# (cmp); and a chat generation, plain and speculative (n-gram drafts), whose
# tokens must equal the CPU's, and one resumed from a prompt state on disk.
# Small shapes: lavapipe is slow.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
w=${2:-$(mktemp -d)}
bin="$build/deltafin"
mkdir -p "$w"
tokens=$(seq -s, 1 24)
n=0
for fam in "k3 --preset tiny" "q --arch qwen3_moe --preset tiny" "d --arch deepseek_v3 --preset tiny"; do
  set -- $fam; name=$1; shift
  "$bin" make-model --out "$w/$name" --seed 7 --force --quiet "$@" >/dev/null
  rm -rf "$w/$name-store" "$w/$name-d1" "$w/$name-d2"
  mkdir -p "$w/$name-d1" "$w/$name-d2"
  "$bin" setup --from "$w/$name" --store "$w/$name-store" --drives "$w/$name-d1,$w/$name-d2" >/dev/null 2>&1
  "$bin" logits --model "$w/$name" --tokens "$tokens" --out "$w/$name-cpu.npy" >/dev/null 2>&1
  for src in "--model $w/$name" "--store $w/$name-store"; do
    for step in 0 1; do
      "$bin" logits $src --backend vulkan --step $step --tokens "$tokens" --out "$w/$name-vk.npy" >/dev/null 2>"$w/err" ||
        { cat "$w/err"; exit 1; }
      cmp "$w/$name-cpu.npy" "$w/$name-vk.npy" || { echo "DIFFER: $name $src step $step: vulkan against cpu"; exit 1; }
      n=$((n + 1))
    done
  done
  # A device budget of 1 MB: part of the spine staged per use, the expert
  # tier evicting; the same bits.
  "$bin" logits --store "$w/$name-store" --backend vulkan --device-memory 0.001 --tokens "$tokens" --out "$w/$name-vk.npy" \
    >/dev/null 2>"$w/err" || { cat "$w/err"; exit 1; }
  cmp "$w/$name-cpu.npy" "$w/$name-vk.npy" || { echo "DIFFER: $name --device-memory 0.001: vulkan against cpu"; exit 1; }
  n=$((n + 1))
  # Generation: plain and speculative on the device, against the CPU's tokens.
  gen() { "$bin" run --model "$w/$name" --prompt "the cat sat on the mat and the cat sat on the" --max-new 12 \
            --tokens-out "$w/$name-$1.tok" "${@:2}" >/dev/null 2>"$w/err" || { cat "$w/err"; exit 1; }; }
  gen cpu
  gen vk --backend vulkan
  gen vkspec --backend vulkan --draft ngram
  cmp "$w/$name-cpu.tok" "$w/$name-vk.tok" || { echo "DIFFER: $name generation: vulkan against cpu"; exit 1; }
  cmp "$w/$name-cpu.tok" "$w/$name-vkspec.tok" || { echo "DIFFER: $name speculative generation on vulkan"; exit 1; }
  # Prompt states on disk (whole blocks of 256 positions): the second run
  # resumes from the state the first wrote. K3 and Qwen3-MoE.
  if [ "$name" = k3 ] || [ "$name" = q ]; then
    ids=$(seq -s, 1 300)
    rm -rf "$w/$name-states"
    long() { "$bin" run --model "$w/$name" --prompt-ids "$ids" --max-new 4 --tokens-out "$w/$name-$1.tok" "${@:2}" \
               >/dev/null 2>"$w/err" || { cat "$w/err"; exit 1; }; }
    long long-cpu
    long long-vk1 --backend vulkan --prompt-cache-dir "$w/$name-states"
    ls "$w/$name-states"/*.state >/dev/null 2>&1 || { echo "$name: no prompt state was written"; exit 1; }
    long long-vk2 --backend vulkan --prompt-cache-dir "$w/$name-states"
    cmp "$w/$name-long-cpu.tok" "$w/$name-long-vk2.tok" || { echo "DIFFER: $name resumed from a prompt state on disk"; exit 1; }
  fi
  echo "$name: vulkan = cpu ($((n)) logits files so far; generation plain and speculative)"
done
echo "vulkan: all $n logits comparisons and every generation identical to the CPU's"
