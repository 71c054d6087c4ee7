#!/usr/bin/env bash
# A/B of route lookahead on one store: off, auto, on — same drives, same
# session, the store's heat histogram restored before each arm so every arm
# starts from the same cache policy state.
#   sudo bench/streaming/lookahead_ab.sh N [MBPS=250] [MEM=1800M] [TOKENS=8]
# Needs a store at $DFBENCH_WORK/storeN made by run.sh (its drives still hold the experts).
set -euo pipefail
N=${1:?drive count}
MBPS=${2:-250}
MEM=${3:-1800M}
TOKENS=${4:-8}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RIG=${DFBENCH_RIG:-$ROOT/../shared/bench}
DF=$ROOT/build/release/deltafin
WORK=${DFBENCH_WORK:-/var/tmp/df}
STORE=$WORK/store$N
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-lookahead-ab-N$N${AB_SUFFIX:-}  # AB_SUFFIX=-replicated etc. keeps runs apart
mkdir -p "$OUT"
"$RIG/drives-up.sh" "$N" "$MBPS" >/dev/null
cp "$STORE/heat.json" "$OUT/heat-before.json" 2>/dev/null || true
for arm in off auto on; do
  [ -f "$OUT/heat-before.json" ] && cp "$OUT/heat-before.json" "$STORE/heat.json"
  "$RIG/in-cgroup.sh" --mem "$MEM" --stats "$OUT/cgroup-$arm.txt" -- "$DF" run --store "$STORE" \
      --prompt "The quick brown fox jumps over" --max-new "$TOKENS" --ignore-eos --stats --cache-gb 1.0 \
      --threads 2 --lookahead "$arm" --stats-json "$OUT/run-$arm.json" >"$OUT/run-$arm.log" 2>&1
  grep "^decode:" "$OUT/run-$arm.log" | sed "s/^/$arm: /"
done
"$RIG/drives-down.sh" >/dev/null || true
