#!/usr/bin/env bash
# The drive-scaling and oversubscription suites with `deltafin bench` (issue 5):
#   scaling:  N = 1..4 throttled drives, one memory cap: cold runs of fixed
#             prompts per N, then `deltafin bench-chart --scaling` over them;
#   oversub:  N_OVERSUB drives, memory caps shrinking from the expert bank's
#             size down (the bank is 5.6 GB): how decode degrades as less of
#             the model fits.
# Every run is `deltafin bench --cold` (deltafin's cache empty, page cache of
# the expert files dropped, before each measured run) inside the memory cgroup,
# with fio on the same drives first. Pictures (drives, steps, hits) per run.
# Needs root and fio; takes its drives down on exit.
#
#   sudo bench/suites/run.sh [MBPS=250]
#   environment: SUITES ("scaling oversub"), RUNS (2), NEW (8), MEM (1800M), CACHE_GB (1.0),
#                N_OVERSUB (2), CAPS ("4000M:2.5 2600M:1.5 1800M:1.0 1200M:0.6": cap:cache_gb pairs),
#                PROMPTS (a prompts file for deltafin bench; default one fixed 8-token prompt,
#                so a cold run at one 250 MB/s drive takes under a minute)
set -euo pipefail
MBPS=${1:-250}
# shellcheck source=SCRIPTDIR/../lib.sh
source "$(dirname "$0")/../lib.sh"
SUITES=${SUITES:-"scaling oversub"}
RUNS=${RUNS:-2}
NEW=${NEW:-8}
MEM=${MEM:-1800M}
CACHE_GB=${CACHE_GB:-1.0}
N_OVERSUB=${N_OVERSUB:-2}
CAPS=${CAPS:-"4000M:2.5 2600M:1.5 1800M:1.0 1200M:0.6"}
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-suites
mkdir -p "$OUT" "$WORK"
if [ -z "${PROMPTS:-}" ]; then
  PROMPTS=$OUT/prompts.txt
  echo "301,402,503,604,705,806,907,108" >"$PROMPTS"
fi
bench_prerequisites
trap '"$RIG/drives-down.sh" >/dev/null 2>&1 || true' EXIT

store_on() {  # store_on N TAG: drives up, fio (fio-TAG.json), a fresh store over them
  bench_drives_up "$1" "$MBPS"
  bench_fio "$MEM" "$OUT/fio-$2.json" /dev/null
  bench_fresh_store "$WORK/suite-store"
  "$DF" setup --from "$CKPT" --store "$WORK/suite-store" --drives "$dlist" --drive-mbps "$mbps" --quiet \
      >"$OUT/setup-$2.log" 2>&1
}
bench() {  # bench NAME MEM CACHE_GB
  "$RIG/in-cgroup.sh" --mem "$2" --stats "$OUT/$1.cgroup" -- "$DF" bench --store "$WORK/suite-store" --cold \
      --prompts "$PROMPTS" --runs "$RUNS" --warmup 1 --max-new "$NEW" --cache-gb "$3" --threads 2 \
      --json "$OUT/$1.json" --svg "$OUT/$1" >"$OUT/$1.txt" 2>&1
}

if [[ " $SUITES " == *" scaling "* ]]; then
  for N in 1 2 3 4; do
    store_on "$N" "$N"
    bench "scaling-$N" "$MEM" "$CACHE_GB"
  done
  "$DF" bench-chart --scaling "$OUT/scaling.svg" "$OUT"/scaling-[1-4].json >"$OUT/scaling-chart.txt" 2>&1
fi
if [[ " $SUITES " == *" oversub "* ]]; then
  store_on "$N_OVERSUB" oversub
  for pair in $CAPS; do bench "oversub-${pair%%:*}" "${pair%%:*}" "${pair##*:}"; done
fi
"$RIG/drives-down.sh" >/dev/null || true
trap - EXIT
{
  echo "command: bench/suites/run.sh $MBPS (SUITES=\"$SUITES\" RUNS=$RUNS NEW=$NEW MEM=$MEM CACHE_GB=$CACHE_GB N_OVERSUB=$N_OVERSUB CAPS=\"$CAPS\" PROMPTS=$PROMPTS)"
  python3 "$ROOT/bench/suites/table.py" "$OUT"
} | tee "$OUT/table.md"
