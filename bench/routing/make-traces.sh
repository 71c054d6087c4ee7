#!/usr/bin/env bash
# Regenerates the routing-profile study (issue 35): for every profile of
# `make-model --routing-profile` and both families, a benchmark checkpoint and
# the decode route traces of two disjoint prompt sets (train: heat is learned
# there; test: held out), then the statistics and coverage charts.
#
#   bench/routing/make-traces.sh OUT_DIR        (DELTAFIN=path/to/deltafin to choose the binary)
#
# Writes OUT_DIR/prompts-{train,test}.txt (8 paragraphs each from docs/*.md,
# alternating, one per line, cut to 400 characters at a word), OUT_DIR/models/
# {k3,qwen3_moe}-PROFILE (the checkpoints, kept for cache benchmarks),
# OUT_DIR/{k3,qwen3_moe}-PROFILE-{train,test}.trace (route traces: greedy,
# 160 decoded tokens per prompt, resident), OUT_DIR/stats.txt and .json
# (profile_stats.py over the train traces) and OUT_DIR/coverage-{k3,qwen3_moe}.svg.
# Shapes: K3 small with 896 experts, top-16, 8 layers (7 MoE); Qwen3-MoE small
# with 128 experts, top-8, hidden 256, 6 layers. About 4 minutes on 2 cores.
set -euo pipefail
out=${1:?usage: make-traces.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${DELTAFIN:-$root/build/release/deltafin}
profiles=(uniform k3-fork flat-balanced olmoe-like glm-like)
max_new=${MAX_NEW:-160}
mkdir -p "$out/models"

python3 - "$root/docs" "$out" <<'EOF'
import glob, re, sys
docs, out = sys.argv[1], sys.argv[2]
paras = []
for f in sorted(glob.glob(docs + "/*.md")):
    for p in re.split(r"\n\s*\n", open(f).read()):
        p = " ".join(l.strip() for l in p.splitlines())
        if p.startswith(("#", "|", "```", "-", "*", ">")) or len(p) < 300:
            continue
        paras.append(p[:400].rsplit(" ", 1)[0])
# Sixteen paragraphs spread evenly over the docs, alternating train and test.
picked = paras[:: max(1, len(paras) // 16)][:16]
open(out + "/prompts-train.txt", "w").write("\n".join(picked[0::2]) + "\n")
open(out + "/prompts-test.txt", "w").write("\n".join(picked[1::2]) + "\n")
EOF

declare -A shape=(
  [k3]="--arch k3 --preset small --experts 896 --top-k 16 --layers 8"
  [qwen3_moe]="--arch qwen3_moe --preset small --experts 128 --top-k 8 --hidden 256 --moe-intermediate 128 --layers 6"
)
start=$SECONDS
for fam in k3 qwen3_moe; do
  for p in "${profiles[@]}"; do
    m="$out/models/$fam-$p"
    # shellcheck disable=SC2086
    "$bin" make-model ${shape[$fam]} --routing-profile "$p" --seed 1 --out "$m" --force --quiet > "$out/models/$fam-$p.txt"
    for set in train test; do
      "$bin" bench --model "$m" --prompts "$out/prompts-$set.txt" --max-new "$max_new" --runs 1 --warmup 0 \
        --route-trace "$out/$fam-$p-$set.trace" > "$out/$fam-$p-$set.bench.txt" 2>&1
    done
    echo "$fam $p: $((SECONDS - start)) s"
  done
done

for fam in k3 qwen3_moe; do
  args=()
  for p in "${profiles[@]}"; do args+=("$p=$out/$fam-$p-train.trace"); done
  python3 "$root/bench/routing/profile_stats.py" --json "$out/stats-$fam.json" --svg "$out/coverage-$fam.svg" \
    --title "Coverage of decode routes per MoE layer, $fam (train prompts)" "${args[@]}"
done > "$out/stats.txt"
cat "$out/stats.txt"
echo "done in $((SECONDS - start)) s"
