#!/usr/bin/env bash
# A/B of route lookahead on one store: off, auto, on — same drives, same
# session, the store's heat histogram restored before each arm so every arm
# starts from the same cache policy state; fio on the drives first, so
# bench/streaming/ab_table.py can give each arm's ratios.
#   sudo bench/streaming/lookahead_ab.sh N [MBPS=250] [MEM=1800M] [TOKENS=8]
#   environment: LAYOUT=whole|striped  build a fresh store with that layout first
#                (default: use $DFBENCH_WORK/storeN as run.sh left it)
#                AB_SUFFIX          appended to the results directory name
#                ARMS               default "off auto on"
set -euo pipefail
N=${1:?drive count}
MBPS=${2:-250}
MEM=${3:-1800M}
TOKENS=${4:-8}
# shellcheck source=SCRIPTDIR/../lib.sh
source "$(dirname "$0")/../lib.sh"
STORE=$WORK/store$N
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-lookahead-ab-N$N${AB_SUFFIX:-}
ARMS=${ARMS:-off auto on}
mkdir -p "$OUT"
bench_prerequisites
bench_drives_up "$N" "$MBPS"
trap '"$RIG/drives-down.sh" >/dev/null || true' EXIT
if [ -n "${LAYOUT:-}" ]; then
  bench_fresh_store "$STORE"
  "$DF" setup --from "$CKPT" --store "$STORE" --drives "$dlist" --drive-mbps "$mbps" --layout "$LAYOUT" --quiet \
      >"$OUT/setup.log" 2>&1
fi
bench_fio "$MEM" "$OUT/fio.json" "$OUT/fio.cgroup.txt"
cp "$STORE/heat.json" "$OUT/heat-before.json" 2>/dev/null || true
for arm in $ARMS; do
  [ -f "$OUT/heat-before.json" ] && cp "$OUT/heat-before.json" "$STORE/heat.json"
  "$RIG/in-cgroup.sh" --mem "$MEM" --stats "$OUT/cgroup-$arm.txt" -- "$DF" run --store "$STORE" \
      --prompt "The quick brown fox jumps over" --max-new "$TOKENS" --ignore-eos --stats --cache-gb 1.0 \
      --threads 2 --lookahead "$arm" --stats-json "$OUT/run-$arm.json" >"$OUT/run-$arm.log" 2>&1
  grep "^decode:" "$OUT/run-$arm.log" | sed "s/^/$arm: /"
done
python3 "$ROOT/bench/streaming/ab_table.py" "$OUT" $ARMS | tee "$OUT/table.md"
