#!/usr/bin/env bash
# What the slice size costs in compute (issue 6: the default --prefill-chunk
# is chosen by measurement): one prompt prefilled with every expert resident
# (no I/O), for each slice size in CHUNKS, the sizes alternated REPS times
# (a b c a b c ...) so the shared machine's drift hits them alike. No root.
#
#   bench/prefill/chunk_sweep.sh [P=512]
#   environment: CHUNKS ("0 256 128 64"), REPS (2), THREADS (2)
set -euo pipefail
P=${1:-512}
# shellcheck source=SCRIPTDIR/../lib.sh
source "$(dirname "$0")/../lib.sh"
CHUNKS=${CHUNKS:-0 256 128 64}
REPS=${REPS:-2}
THREADS=${THREADS:-2}
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-prefill-chunk-sweep-$P
mkdir -p "$OUT" "$WORK"
[ -f "$CKPT/config.json" ] || "$DF" make-model --preset bench --out "$CKPT"
prompt=$(bench_prompt_ids "$P")
for ((r = 1; r <= REPS; r++)); do
  for c in $CHUNKS; do
    "$DF" run --model "$CKPT" --prompt-ids "$prompt" --max-new 1 --threads "$THREADS" --prefill-chunk "$c" \
        --stats-json "$OUT/chunk-$c-$r.json" >"$OUT/chunk-$c-$r.log" 2>&1
  done
done
{
  echo "command: bench/prefill/chunk_sweep.sh $P (CHUNKS='$CHUNKS' REPS=$REPS THREADS=$THREADS)"
  echo
  echo "| --prefill-chunk | rows per expert per slice (top-16 of 64) | TTFT s per rep | median | / chunk ${CHUNKS%% *} |"
  echo "|---|---|---|---|---|"
  python3 - "$OUT" "$P" "$REPS" $CHUNKS <<'PY'
import json, statistics, sys
out, P, reps, chunks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
base = None
for c in chunks:
    t = [json.load(open(f"{out}/chunk-{c}-{r}.json"))["prefill"]["ttft_ms"] / 1e3 for r in range(1, reps + 1)]
    med = statistics.median(t)
    base = base or med
    rows = (P if c == "0" else min(P, int(c))) * 16 / 64
    print(f"| {c} | {rows:.0f} | {' / '.join('%.2f' % x for x in t)} | {med:.2f} | {med / base:.3f} |")
PY
} | tee "$OUT/table.md"
