#!/usr/bin/env bash
# Logits of two deltafin builds, byte for byte, for a refactor that must change
# no bit: scripts/logits-ab.sh OLD_BIN NEW_BIN WORKDIR
# Every family (tiny presets; small for K3 and Qwen3-MoE; each DeepSeek-V3 flavour), resident (--model) and streamed from a
# store over two drives (--store, made by NEW), 1 and 2 threads, every ISA path the CPU
# has, all positions at once and one by one.
set -euo pipefail
old=$1 new=$2 w=$3
rm -rf "$w"; mkdir -p "$w"
tokens=$(seq -s, 1 24)
n=0
for fam in "k3 --preset tiny" "k3s --preset small" "q --arch qwen3_moe --preset tiny" "qs --arch qwen3_moe --preset small" \
           "d --arch deepseek_v3 --preset tiny" "dq --arch deepseek_v3 --flavor deepseek_v3_q_proj --preset tiny" \
           "k2 --arch deepseek_v3 --flavor kimi_k2 --preset tiny" "k2t --arch deepseek_v3 --flavor kimi_k2_thinking --preset tiny"; do
  set -- $fam; name=$1; shift
  "$new" make-model --out "$w/$name" --seed 7 --force --quiet "$@" >/dev/null
  mkdir -p "$w/$name-d1" "$w/$name-d2"
  "$new" setup --from "$w/$name" --store "$w/$name-store" --drives "$w/$name-d1,$w/$name-d2" >/dev/null
  for src in "--model $w/$name" "--store $w/$name-store"; do
    for threads in 1 2; do
      for isa in scalar avx2 avx512; do
        for step in 0 1; do
          a="$w/a.npy"; b="$w/b.npy"
          DELTAFIN_ISA=$isa "$old" logits $src --threads $threads --step $step --tokens "$tokens" --out "$a" >/dev/null 2>"$w/err" || {
            grep -q "does not support" "$w/err" && continue
            # A family the old build predates: nothing to compare against.
            grep -qE "not a model family deltafin knows|is not one this build runs" "$w/err" && { echo "$name: the old build does not know this family; skipped"; continue 5; }
            cat "$w/err"; exit 1; }
          DELTAFIN_ISA=$isa "$new" logits $src --threads $threads --step $step --tokens "$tokens" --out "$b" >/dev/null 2>&1
          cmp "$a" "$b" || { echo "DIFFER: $name $src threads $threads isa $isa step $step"; exit 1; }
          n=$((n + 1))
        done
      done
    done
  done
  echo "$name: identical ($(stat -c %s "$w/b.npy") bytes per file)"
done
echo "all $n pairs identical"
