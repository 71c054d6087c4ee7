#!/usr/bin/env bash
# The cache-policy study of issue 35: every routing profile x family's route
# traces (bench/routing/make-traces.sh) replayed by `deltafin cache-sim`
# through each eviction policy and Belady's optimum, at sizes from one
# layer's working set (top-k slots) to half the bank; the heat is learned on
# the train prompts and measured on the test prompts (held out), and on the
# test prompts themselves (in-sample); a pinned tier of half the slots from
# that heat is a second arm. Writes OUT/<family>-<profile>-<arm>.json and
# prints the tables (bench/cache/study_table.py), also to OUT/table.md, and
# the hit-rate curves for bench/projection/project.py (OUT/hit-curves.json).
#
#   bench/cache/study.sh TRACES_DIR OUT_DIR      # e.g. /var/tmp/df35/traces /var/tmp/df35/study
#   environment: DF (the deltafin binary, default build/release/deltafin)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TR=${1:?traces directory (bench/routing/make-traces.sh OUT_DIR/traces)}
OUT=${2:?output directory}
DF=${DF:-$ROOT/build/release/deltafin}
mkdir -p "$OUT"
POLICIES=lru,frequency,cycle-heat,cycle-reuse
for family in k3 qwen3_moe; do
  # one layer's working set (top-k), then 1, 2, 5, 10, 20, 30 and 50 % of the bank
  case $family in
    k3) SLOTS=16,63,125,314,627,1254,1882,3136 ;;        # 7 MoE layers x 896, top-16
    qwen3_moe) SLOTS=8,16,38,77,154,230,384 ;;           # 6 MoE layers x 128, top-8
  esac
  for profile in uniform k3-fork flat-balanced olmoe-like glm-like; do
    train=$TR/$family-$profile-train.trace test=$TR/$family-$profile-test.trace
    "$DF" cache-sim "$test" --heat-from "$train" --slots $SLOTS --policies $POLICIES \
        --json "$OUT/$family-$profile-heldout.json" >/dev/null
    # the engine's default, auto: the policy its rule picks from the train prompts' heat
    "$DF" cache-sim "$test" --heat-from "$train" --slots $SLOTS --policies auto \
        --json "$OUT/$family-$profile-auto.json" | grep '^auto is' >"$OUT/$family-$profile-auto.txt"
    "$DF" cache-sim "$test" --heat-from "$test" --slots $SLOTS --policies $POLICIES \
        --json "$OUT/$family-$profile-insample.json" >/dev/null
    # (not at the smallest size: half of one layer's working set pinned leaves too few slots)
    "$DF" cache-sim "$test" --heat-from "$train" --slots "${SLOTS#*,}" --policies $POLICIES --pinned-fraction 0.5 \
        --json "$OUT/$family-$profile-pinned.json" >/dev/null
  done
done
python3 "$ROOT/bench/cache/study_table.py" "$OUT" | tee "$OUT/table.md"
