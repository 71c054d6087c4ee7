#!/usr/bin/env bash
# Decode seconds per token against cache size, per eviction policy, on the
# shared rig (issue 35): a store on a throttled drive, every run under
# in-cgroup.sh (caches dropped, a memory cap of the cache plus 0.6 GB), route
# lookahead off so the figures are the cache's. The heat is learned once on
# the train prompt (a run whose heat.json is kept) and put back before every
# measured run, which decodes the test prompt: held out, and every run starts
# from the same heat. Needs root and the rig's drives up (drives-up.sh).
#
#   bench/cache/rig.sh STORE OUT_DIR
#   environment: DF (binary), SIZES (cache GB list, "0.9 1.8"), POLICIES ("lru cycle-heat cycle-reuse"),
#                N (decoded tokens, 16), TRAIN / TEST (prompt files, one prompt per line)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STORE=${1:?store directory on the rig drives}
OUT=${2:?output directory}
DF=${DF:-$ROOT/build/release/deltafin}
RIG=${DFBENCH_RIG:-$ROOT/../shared/bench}
SIZES=${SIZES:-"0.9 1.8"}
POLICIES=${POLICIES:-"lru cycle-heat cycle-reuse"}
N=${N:-16}
mkdir -p "$OUT"
TRAIN=${TRAIN:-$OUT/prompt-train.txt}
TEST=${TEST:-$OUT/prompt-test.txt}
[ -f "$TRAIN" ] || echo "The history of the city begins with a small harbour where fishing boats came in each evening" >"$TRAIN"
[ -f "$TEST" ] || echo "A recipe for bread needs flour, water, salt and yeast, and the patience to let the dough rise twice" >"$TEST"
run() {  # name cache_gb policy prompts
  local cap
  cap=$(python3 -c "print(int(($2 + 0.6) * 1e9))")
  "$RIG/in-cgroup.sh" --mem "$cap" --stats "$OUT/$1.cgroup" -- "$DF" bench --store "$STORE" --runs 1 --warmup 0 \
      --prompts "$4" --max-new "$N" --threads 2 --cache-gb "$2" --cache-policy "$3" --lookahead off \
      --json "$OUT/$1.json" >"$OUT/$1.txt" 2>"$OUT/$1.log"
}
# bench leaves heat.json alone (runs must not change the store); run writes it.
rm -f "$STORE/heat.json"
"$RIG/in-cgroup.sh" --mem 2400000000 --stats "$OUT/train.cgroup" -- "$DF" run --store "$STORE" \
    --prompt "$(head -1 "$TRAIN")" --max-new "$N" --ignore-eos --threads 2 --cache-gb 1.8 --lookahead off \
    >"$OUT/train-stdout.txt" 2>"$OUT/train.log"
cp "$STORE/heat.json" "$OUT/heat-train.json"
for size in $SIZES; do
  for policy in $POLICIES; do
    cp "$OUT/heat-train.json" "$STORE/heat.json"
    run "test-$size-$policy" "$size" "$policy" "$TEST"
  done
done
python3 - "$OUT" "$SIZES" "$POLICIES" <<'PY' | tee "$OUT/table.md"
import json, sys
out, sizes, policies = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
print("| cache GB | policy | hit rate | decode s/token | bytes read per token (GB) | tokens/s |")
print("|---|---|---|---|---|---|")
for size in sizes:
    for p in policies:
        s = json.load(open(f"{out}/test-{size}-{p}.json"))["summary"]["A"]
        tps = s["decode_tokens_per_s"]["median"]
        print(f"| {size} | {p} | {s['hit_rate']['median']:.3f} | {1 / tps:.3f} | "
              f"{s['bytes_read_per_token']['median'] / 1e9:.3f} | {tps:.3f} |")
PY
