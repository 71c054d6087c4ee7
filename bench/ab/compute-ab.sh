#!/usr/bin/env bash
# Compute A/B of two deltafin builds on resident checkpoints: prefill and
# decode time, the two builds alternated round by round (the order flips each
# round) so that drift on a shared machine falls on both alike; the table has
# every round and the median of new/old per model.
#   bench/ab/compute-ab.sh OLD_BIN NEW_BIN OUT_DIR MODEL_DIR... 
# Env: ROUNDS (5), PROMPT (tokens, 32), NEW (decoded tokens, 8), THREADS (2).
set -euo pipefail
old=$1 new=$2 out=$3; shift 3
rounds=${ROUNDS:-5} prompt=${PROMPT:-32} gen=${NEW:-8} threads=${THREADS:-2}
mkdir -p "$out"
ids=$(seq -s, 101 $((100 + prompt)))
rows="$out/rounds.tsv"
printf 'model\tround\tbuild\tprefill_ms\tdecode_ms_per_token\n' > "$rows"
one() {  # model build_name binary round
  local log="$out/$(basename "$1")-$2-$4.log"
  "$3" run --model "$1" --prompt-ids "$ids" --max-new "$gen" --ignore-eos --threads "$threads" --stats >"$log" 2>&1
  local pre dec
  pre=$(sed -n 's/.*; prefill \([0-9.]*\) ms.*/\1/p' "$log")
  dec=$(sed -n 's/^decode \([0-9]*\) tokens in \([0-9.]*\) ms.*/\2 \1/p' "$log" | awk '{printf "%.2f", $1 / $2}')
  printf '%s\t%s\t%s\t%s\t%s\n' "$(basename "$1")" "$4" "$2" "$pre" "$dec" >> "$rows"
}
for model in "$@"; do
  for r in $(seq 1 "$rounds"); do
    if (( r % 2 )); then one "$model" old "$old" "$r"; one "$model" new "$new" "$r"
    else one "$model" new "$new" "$r"; one "$model" old "$old" "$r"; fi
  done
done
python3 - "$rows" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
for model in sorted({r['model'] for r in rows}):
    by = {}
    for r in rows:
        if r['model'] == model: by.setdefault(r['round'], {})[r['build']] = r
    pre = [float(v['new']['prefill_ms']) / float(v['old']['prefill_ms']) for v in by.values()]
    dec = [float(v['new']['decode_ms_per_token']) / float(v['old']['decode_ms_per_token']) for v in by.values()]
    med = lambda k, b: statistics.median(float(v[b][k]) for v in by.values())
    print(f"{model}: prefill new/old median {statistics.median(pre):.3f} (range {min(pre):.3f}-{max(pre):.3f}), "
          f"old {med('prefill_ms','old'):.0f} ms, new {med('prefill_ms','new'):.0f} ms; "
          f"decode new/old median {statistics.median(dec):.3f} (range {min(dec):.3f}-{max(dec):.3f}), "
          f"old {med('decode_ms_per_token','old'):.1f} ms/token, new {med('decode_ms_per_token','new'):.1f} ms/token; {len(pre)} rounds")
PY
