#!/usr/bin/env bash
# Time to first token against prompt length, beside its compute floor and the
# peak RSS against the memory plan (bench_context --prefill), for the small
# preset (and the bench preset when BENCH=1: real K3 expert sizes, 5.6 GB in
# RAM, for the shorter lengths only: its prefill costs ~2.6 G multiply-adds a
# position). Every weight in RAM. Writes
# bench/results/<date>-context/prefill-<preset>.txt and prints them.
#
#   bench/context/prefill.sh [LENGTHS] [THREADS] [BENCH_LENGTHS]
#   defaults: 1024,8192,32768  1  1024
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DF=$ROOT/build/release/deltafin
BIN=$ROOT/build/release/bench/bench_context
[ -x "$BIN" ] || { echo "build first: scripts/build.sh release" >&2; exit 1; }
lengths=${1:-1024,8192,32768}
threads=${2:-1}
bench_lengths=${3:-1024}
work=${DFBENCH_WORK:-/var/tmp/df}
out=$ROOT/bench/results/$(date +%F)-context
mkdir -p "$work" "$out"
presets="small"
[ "${BENCH:-0}" = 1 ] && presets="small bench"
for preset in $presets; do
  ckpt=$work/context-$preset
  [ -f "$ckpt/config.json" ] || "$DF" make-model --preset "$preset" --out "$ckpt" --quiet
  l=$lengths
  [ "$preset" = bench ] && l=$bench_lengths
  # One process per length: the peak RSS of one prefill is not hidden by the
  # memory the allocator kept from a longer one.
  {
    echo "# bench_context $preset --prefill $l, $threads thread(s), one process per length; $(date -u +%FT%TZ)"
    echo "# command: bench/context/prefill.sh $lengths $threads $bench_lengths (BENCH=${BENCH:-0})"
    first=1
    for n in ${l//,/ }; do
      if [ $first = 1 ]; then "$BIN" "$ckpt" --prefill "$n" --threads "$threads"; first=0
      else "$BIN" "$ckpt" --prefill "$n" --threads "$threads" | tail -n 1; fi
    done
  } | tee "$out/prefill-$preset.txt"
done
