#!/usr/bin/env bash
# deltafin against llama.cpp's default CPU build on the K3-architecture bench
# checkpoint (issue 21): prompt and decode tokens/s, 2 threads, greedy, every
# weight in RAM, both measured in one session, with the ratio deltafin/llama.cpp.
#
#   bench/llama_cpp/compare.sh [OUT_DIR]
#
# Environment (defaults in brackets):
#   LLAMA_DIR   scratch for llama.cpp, outside the tracked tree [/tmp/llama]:
#               package/ (node-llama-cpp from npm), src/ (llama.cpp cloned from the
#               git bundle it ships), build/ (CPU-only build), ckpt/ (checkpoints)
#   NLC_VERSION node-llama-cpp version to fetch when package/ is missing [3.22.1]
#   CKPT        the deltafin bench checkpoint [$LLAMA_DIR/ckpt/bench]; made with
#               `deltafin make-model --preset bench` when missing
#   GGUF        its llama.cpp conversion [$CKPT.gguf]; made when missing
#   DF          the deltafin binary [build/release/deltafin]
#   DF_BASE     optional: a second deltafin binary (an earlier build) measured in
#               every round too, after llama.cpp and before DF, so a change is
#               judged before/after and against llama.cpp in one session
#   THREADS [2]  P (prompt tokens) [128]  N (generated tokens) [32]
#   REPS [5]    measured runs per tool and round (each after one warm-up run)
#   ROUNDS [2]  rounds of llama.cpp then deltafin, alternated; the table gives
#               each round's ratio and, past one round, their median
#   LOAD_MODE   llama-bench --load-mode [none: every weight read into RAM]
#   JOBS        parallel compile jobs [2]; compiles run under `nice -n 15`
#
# Needs: cmake, g++, git, npm (only to fetch node-llama-cpp), /usr/bin/python3 with
# Debian's python3-numpy, python3-torch and python3-tqdm (the converter and its
# GGUF writer), and a release build of
# deltafin (scripts/build.sh release). OUT_DIR, when given, receives the raw files
# (llama-bench JSON, deltafin bench JSON, logs, one set per round) and table.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DF=${DF:-$ROOT/build/release/deltafin}
THREADS=${THREADS:-2}
P=${P:-128}
N=${N:-32}
REPS=${REPS:-5}
ROUNDS=${ROUNDS:-2}
LOAD_MODE=${LOAD_MODE:-none}
OUT=${1:-$(mktemp -d /tmp/df-llama-compare.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# shellcheck source=SCRIPTDIR/llama_lib.sh
source "$ROOT/bench/llama_cpp/llama_lib.sh"
llama_prerequisites

# 1-3. llama.cpp's source and default CPU build; the checkpoint and its
#      lossless conversion (kimi-k3 architecture, MXFP4 experts kept)
llama_source
llama_build llama-bench llama-completion llama-gguf
llama_checkpoint

# 4. the same prompt length for both: P token ids (llama-bench draws its own)
"$PY" - "$P" "$CKPT/config.json" >"$OUT/prompt.txt" <<'PY'
import json, sys
n, c = int(sys.argv[1]), json.load(open(sys.argv[2]))
span = min(700, c.get("text_config", c)["vocab_size"] - 310)
print(",".join(str(300 + (i * 37) % span) for i in range(n)))
PY

# 5. measure, in one session: ROUNDS rounds of llama.cpp then deltafin (A B A B ...),
#    so that both see the same machine when others share it
LB=("$BIN/llama-bench" -m "$GGUF" -t "$THREADS" -p "$P" -n "$N" -r "$REPS" -lm "$LOAD_MODE" -o json)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= ROUNDS; r++)); do
  DB=("$DF" bench --model "$CKPT" --threads "$THREADS" --prompts "$OUT/prompt.txt" --max-new "$N"
    --runs "$REPS" --warmup 1 --json "$OUT/deltafin-$r.json")
  say "round $r/$ROUNDS llama.cpp: ${LB[*]}"
  "${LB[@]}" >"$OUT/llama-bench-$r.json" 2>"$OUT/llama-bench-$r.log"
  if [ -n "${DF_BASE:-}" ]; then
    DBB=("$DF_BASE" "${DB[@]:1}")
    DBB[${#DBB[@]}-1]="$OUT/deltafin-base-$r.json"
    say "round $r/$ROUNDS deltafin (base): ${DBB[*]}"
    "${DBB[@]}" >"$OUT/deltafin-base-bench-$r.txt" 2>"$OUT/deltafin-base-bench-$r.log"
  fi
  say "round $r/$ROUNDS deltafin: ${DB[*]}"
  "${DB[@]}" >"$OUT/deltafin-bench-$r.txt" 2>"$OUT/deltafin-bench-$r.log"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# 6. the table
{
  echo "deltafin vs llama.cpp (CPU), K3-architecture bench checkpoint, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); load average before $load_before, after $load_after"
  echo "deltafin: $(deltafin_build_line "$DF")"
  if [ -n "${DF_BASE:-}" ]; then
    echo "deltafin base: $DF_BASE (sha256 $(sha256sum "$DF_BASE" | cut -c1-12), built $(date -u -r "$DF_BASE" +%Y-%m-%dT%H:%MZ))"
  fi
  echo "llama.cpp: $LLAMA_COMMIT (node-llama-cpp $NLC_VER, release $LLAMA_TAG), $BIN"
  echo "checkpoint: $CKPT -> $GGUF"
  echo "llama.cpp command: ${LB[*]}"
  echo "deltafin command:  ${DB[*]/%-$ROUNDS.json/-R.json}"
  echo
  "$PY" - "$OUT" "$ROUNDS" "$P" "$N" <<'PY'
import json, statistics, sys
out, rounds, p, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def lb_row(lb, n_prompt, n_gen):
    for t in lb:
        if t["n_prompt"] == n_prompt and t["n_gen"] == n_gen:
            return t["avg_ts"], t["stddev_ts"]
    raise SystemExit(f"llama-bench has no pp{n_prompt}/tg{n_gen} row")
metrics = [(f"prompt tok/s (pp{p})", (p, 0), "prefill_tokens_per_s"),
           (f"decode tok/s (tg{n})", (0, n), "decode_tokens_per_s")]
import os
has_base = os.path.exists(f"{out}/deltafin-base-1.json")
base_head = f" {'deltafin base':>22} {'deltafin/base':>14}" if has_base else ""
print(f"{'round':<6}{'metric':<22} {'llama.cpp':>15}{base_head} {'deltafin':>22} {'deltafin/llama.cpp':>19}")
ratios = {m[0]: [] for m in metrics}
base_ratios = {m[0]: [] for m in metrics}
for r in range(1, rounds + 1):
    lb = json.load(open(f"{out}/llama-bench-{r}.json"))
    s = json.load(open(f"{out}/deltafin-{r}.json"))["summary"]["A"]
    sb = json.load(open(f"{out}/deltafin-base-{r}.json"))["summary"]["A"] if has_base else None
    for name, key, dkey in metrics:
        lm, lsd = lb_row(lb, *key)
        d = s[dkey]
        ratios[name].append(d["median"] / lm)
        base_cols = ""
        if sb is not None:
            b = sb[dkey]
            base_ratios[name].append(d["median"] / b["median"])
            base_cols = f" {b['median']:>9.2f} (MAD {b['mad']:<5.2f}) {d['median'] / b['median']:>14.3f}"
        print(f"{r:<6}{name:<22} {lm:>7.2f} ± {lsd:<5.2f}{base_cols} {d['median']:>9.2f} (MAD {d['mad']:<5.2f}) {d['median'] / lm:>13.3f}")
if rounds > 1:
    for name, _, _ in metrics:
        base_cols = f" {'':>22} {statistics.median(base_ratios[name]):>14.3f}" if has_base else ""
        print(f"{'all':<6}{name:<22} {'':>15}{base_cols} {'':>22} {statistics.median(ratios[name]):>13.3f}  (median of the rounds)")
print()
print(f"llama.cpp: mean ± stddev of llama-bench's runs after its warm-up (random prompt ids, pp{p} one batch")
print(f"  of {p}, tg{n} from an empty context); deltafin: median (MAD) of deltafin bench's runs after 1 warm-up")
print(f"  (prompt = prefill of the {p}-id prompt, decode = the greedy steps after it)")
PY
} | tee "$OUT/table.txt"
say "raw files in $OUT"
