#!/usr/bin/env bash
# Streaming benchmark (issue 4 §6): decode from a store spread over N = 1..4
# throttled drives under a memory cap, against fio on the same drives in the
# same session. Needs root (../shared/bench: loop drives, blkio throttle,
# memory cgroup) and fio.
#
#   sudo bench/streaming/run.sh [MBPS=250] [MEM=1800M] [CACHE_GB=1.0] [TOKENS=8]
#   sudo REPLICATE=1 bench/streaming/run.sh ...   # every expert on two drives (N >= 2)
#   sudo LAYOUT=whole bench/streaming/run.sh ...  # one whole file per expert (default: setup's auto = striped)
#   environment: THREADS (compute threads, default 2), LOOKAHEAD (on|off|auto, default auto),
#   ARCH (k3 or qwen3_moe: the bench checkpoint's family, bench/lib.sh)
#
# Writes bench/results/<date>-streaming[-replicated]/{fio-N.json,run-N.json,
# run-N.log,trace-N.jsonl} and prints the table (bench/streaming/table.py).
set -euo pipefail
MBPS=${1:-250}
MEM=${2:-1800M}
CACHE_GB=${3:-1.0}
TOKENS=${4:-8}
# shellcheck source=SCRIPTDIR/../lib.sh
source "$(dirname "$0")/../lib.sh"
REPLICATE=${REPLICATE:-0}
LAYOUT=${LAYOUT:-auto}
SUFFIX=""
[ "$LAYOUT" = whole ] && SUFFIX=-whole
((REPLICATE)) && SUFFIX=-replicated
[ "$ARCH" != k3 ] && SUFFIX=-$ARCH$SUFFIX
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-streaming$SUFFIX
LOOKAHEAD=${LOOKAHEAD:-auto}
THREADS=${THREADS:-2}  # compute threads; the machine this was written on has 2 cores
FIRST_N=$( ((REPLICATE)) && echo 2 || echo 1)
mkdir -p "$OUT" "$WORK"

bench_prerequisites

for N in $(seq "$FIRST_N" 4); do
  bench_drives_up "$N" "$MBPS"
  bench_fio "$MEM" "$OUT/fio-$N.json" "$OUT/fio-$N.cgroup.txt"

  # A store over these drives: setup writes unthrottled; the bandwidth it
  # records is the throttle's (its probe would run outside the throttle cgroup).
  bench_fresh_store "$WORK/store$N"
  replicate=()
  if ((REPLICATE)); then
    # Replication follows the heat histogram: give every routed expert the same heat.
    mkdir -p "$WORK/store$N"
    python3 - "$CKPT/config.json" "$WORK/store$N/heat.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
t = c.get("text_config", c)
L, E = t["num_hidden_layers"], t["num_experts"]
json.dump({"version": 1, "layers": L, "experts": E,
           # K3's layer 0 is dense; Qwen3-MoE's sparse layers follow mlp_only_layers
           "counts": [0.0 if l in t.get("mlp_only_layers", [] if "text_config" not in c else [0]) else 1.0
                      for l in range(L) for e in range(E)]}, open(sys.argv[2], "w"))
PY
    replicate=(--replicate-hot 1000000)
  fi
  "$DF" setup --from "$CKPT" --store "$WORK/store$N" --drives "$dlist" --drive-mbps "$mbps" "${replicate[@]}" \
      --layout "$( ((REPLICATE)) && echo whole || echo "$LAYOUT")" --quiet \
      >"$OUT/setup-$N.log" 2>&1

  "$RIG/in-cgroup.sh" --mem "$MEM" --stats "$OUT/cgroup-run-$N.txt" -- "$DF" run --store "$WORK/store$N" --prompt "The quick brown fox jumps over" \
      --max-new "$TOKENS" --ignore-eos --stats --cache-gb "$CACHE_GB" --lookahead "$LOOKAHEAD" --threads "$THREADS" \
      --stats-json "$OUT/run-$N.json" --trace "$OUT/trace-$N.jsonl" >"$OUT/run-$N.log" 2>&1
done
"$RIG/drives-down.sh" >/dev/null || true
python3 "$ROOT/bench/streaming/table.py" "$OUT" "$MBPS" "$ROOT/bench/results/$(date +%Y-%m-%d)-streaming" | tee "$OUT/table.md"
