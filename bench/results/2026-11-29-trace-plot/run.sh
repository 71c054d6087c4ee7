#!/usr/bin/env bash
# The pictures in this folder: a 1,000-token streamed run of the tiny model
# over two directories with a near-empty cache, traced, then drawn.
set -euo pipefail
DF=${DF:-build/release/deltafin}
W=${W:-/tmp/df-trace-plot}
OUT=$(dirname "$0")
rm -rf "$W" && mkdir -p "$W/d0" "$W/d1"
$DF make-model --preset tiny --out "$W/tiny" --quiet
$DF setup --from "$W/tiny" --store "$W/store" --drives "$W/d0,$W/d1" --drive-mbps 500,500 --quiet
$DF run --store "$W/store" --prompt hello --max-new 1000 --ignore-eos --cache-gb 0.0001 \
    --trace "$W/trace.jsonl" --stats-json "$OUT/stats.json" > /dev/null
$DF trace-plot "$W/trace.jsonl" --stats "$OUT/stats.json" --svg "$OUT/tiny-1000"
wc -l "$W/trace.jsonl"
