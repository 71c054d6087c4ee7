#!/usr/bin/env bash
# Decode time against context length over the latent MLA cache, and the
# session's bytes per position (computed and from RSS), for the small preset
# (and the bench preset when BENCH=1: real K3 expert sizes, 5.6 GB in RAM).
# Every weight in RAM; no drives, no root. Writes
# bench/results/<date>-context/<preset>.txt and prints them.
#
#   bench/context/run.sh [CONTEXTS] [STEPS] [THREADS]
#   defaults: 256,1024,8192,32768,131072  8  1
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DF=$ROOT/build/release/deltafin
BIN=$ROOT/build/release/bench/bench_context
[ -x "$BIN" ] || { echo "build first: scripts/build.sh release" >&2; exit 1; }
contexts=${1:-256,1024,8192,32768,131072}
steps=${2:-8}
threads=${3:-1}
work=${DFBENCH_WORK:-/var/tmp/df}
out=$ROOT/bench/results/$(date +%F)-context
mkdir -p "$work" "$out"
presets="small"
[ "${BENCH:-0}" = 1 ] && presets="small bench"
for preset in $presets; do
  ckpt=$work/context-$preset
  [ -f "$ckpt/config.json" ] || "$DF" make-model --preset "$preset" --out "$ckpt" --quiet
  {
    echo "# bench_context $preset: contexts $contexts, $steps steps, $threads thread(s); $(date -u +%FT%TZ)"
    echo "# command: bench/context/run.sh $contexts $steps $threads"
    "$BIN" "$ckpt" --contexts "$contexts" --steps "$steps" --threads "$threads"
  } | tee "$out/$preset.txt"
done
