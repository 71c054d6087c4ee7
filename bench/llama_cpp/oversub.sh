#!/usr/bin/env bash
# deltafin against llama.cpp on the 3x-oversubscribed rig (issue 35, item 3):
# a memory cap that holds a third of the model (page cache included), the
# weights on throttled drives; decode tokens/s, drive bytes read per decode
# token and time to first token, both tools alternated in one session.
#
#   bench/llama_cpp/oversub.sh [OUT_DIR]            (as root: the rig needs it)
#   PROFILE=k3-fork bench/llama_cpp/oversub.sh OUT  (a skewed-routing checkpoint)
#
# deltafin streams from a store made by `deltafin setup` on the drives (its
# spine and manifest on drive 0 too, so both tools read every weight through
# the throttle); llama.cpp maps its GGUF from the same drives with its default
# load mode (mmap). Each run is a fresh process under ../shared/bench's
# in-cgroup.sh (caches dropped, memory cap, drive throttle). Per round:
# llama.cpp (P-token prompt, N generated), llama.cpp prompt-only (the same
# prompt, 1 generated), deltafin, deltafin prompt-only. Drive bytes per decode
# token = (drive bytes of the full run - of the prompt-only run) / (decode steps
# of the full run - of the prompt-only run), from the loop devices' counters.
#
# Environment (defaults in brackets):
#   CKPT      the K3 checkpoint [$LLAMA_DIR/ckpt/bench; with PROFILE,
#             $LLAMA_DIR/ckpt/bench-$PROFILE]; made when missing with
#             `deltafin make-model --arch k3 --preset bench` (+ --routing-profile PROFILE)
#   PROFILE   routing profile for make-model when CKPT is made [none: random routing]
#   GGUF      its llama.cpp conversion [$CKPT.gguf]; made when missing
#   DRIVES [1]  MBPS [250]: throttled drives. With 1 drive both tools read the
#             same drive. With 2+, deltafin stripes its store over all of them and
#             llama.cpp's GGUF is split (llama-gguf-split, whole tensors in file
#             order) into one shard per drive: this kernel has neither md nor
#             device-mapper, so no RAID 0 can stripe one file, and llama.cpp faults
#             the shards in as its layers need them, mostly one drive at a time (README.md)
#   P [32]    prompt tokens (a fixed text cut to P tokens of the checkpoint's tokenizer)
#   N [16]    generated tokens
#   ROUNDS [3]  THREADS [2]: a round takes about 4.5 minutes on the uniform bench
#             checkpoint at 1 x 250 MB/s (an invocation 844 s with the setup)
#   EXTRA_MB [200]  the cap's room beyond the weights' third, for what each tool
#             needs besides weights (measured on the bench checkpoint: llama.cpp's
#             compute buffer 70 MiB, KV and recurrent state 0.5 MiB, plus the
#             process; deltafin 41 MB of buffers beside its spine and cache, plus
#             the spine file's page cache while it loads); cap = GGUF bytes / 3 + EXTRA_MB
#   LLAMA_ARGS [--no-repack]  extra llama-completion options. Its default repacks
#             MXFP4 weights into its own buffers (CPU_REPACK), a copy of every
#             expert in anonymous memory, which the cap OOM-kills during the load;
#             --no-repack keeps them in the mapping (README.md)
#   CACHE_GB  deltafin --cache-gb [(GGUF bytes / 3 - the store's spine bytes) / 1e9]
#   DF        the deltafin binary [build/release/deltafin]
#   LLAMA_DIR, NLC_VERSION, JOBS: as compare.sh (llama_lib.sh)
#   DFBENCH_RIG  the rig's scripts [../shared/bench]
#
# OUT_DIR receives every run's output, log and in-cgroup stats, prompt.txt and
# table.txt. The drives are taken down on exit (images kept).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RIG=${DFBENCH_RIG:-$ROOT/../shared/bench}
DF=${DF:-$ROOT/build/release/deltafin}
PROFILE=${PROFILE:-}
if [ -n "$PROFILE" ]; then
  CKPT=${CKPT:-${LLAMA_DIR:-/tmp/llama}/ckpt/bench-$PROFILE}
  MAKE_MODEL_ARGS="--routing-profile $PROFILE"
fi
DRIVES=${DRIVES:-1}
MBPS=${MBPS:-250}
P=${P:-32}
N=${N:-16}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
EXTRA_MB=${EXTRA_MB:-200}
LLAMA_ARGS=${LLAMA_ARGS---no-repack}
OUT=${1:-$(mktemp -d /tmp/df-llama-oversub.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# shellcheck source=SCRIPTDIR/llama_lib.sh
source "$ROOT/bench/llama_cpp/llama_lib.sh"

[ "$(id -u)" = 0 ] || { echo "run as root: the rig's drives and cgroups need it" >&2; exit 1; }
[ -x "$RIG/in-cgroup.sh" ] || { echo "the rig's scripts are not at $RIG (set DFBENCH_RIG)" >&2; exit 1; }
[ "$N" -ge 2 ] || { echo "N must be at least 2 (decode is measured past the first token)" >&2; exit 1; }
llama_prerequisites
t_start=$(date +%s)

# 1. llama.cpp, the checkpoint and its GGUF
llama_source
targets=(llama-completion)
[ "$DRIVES" -gt 1 ] && targets+=(llama-gguf-split)
llama_build "${targets[@]}"
llama_checkpoint

# 2. the drives, deltafin's store and llama.cpp's GGUF on them. Both are made
#    again only when the checkpoint or the drive count changed (a stamp beside
#    them names what they hold).
trap '"$RIG/drives-down.sh" >/dev/null 2>&1 || true' EXIT
"$RIG/drives-up.sh" "$DRIVES" "$MBPS" >"$OUT/drives-up.log"
drives=() loops=()
for ((i = 0; i < DRIVES; i++)); do
  drives+=("/mnt/dfdrive$i")
  loops+=("$(findmnt -n -o SOURCE --mountpoint "/mnt/dfdrive$i")")
done
dlist=$(IFS=,; echo "${drives[*]}")
mbps_list=$(printf "$MBPS%.0s," $(seq "$DRIVES")); mbps_list=${mbps_list%,}
stamp="$CKPT $(stat -c '%s %Y' "$GGUF") drives=$DRIVES"
STORE=/mnt/dfdrive0/oversub-store
LDIR=/mnt/dfdrive0/oversub-llama
if [ "$(cat "$STORE.stamp" 2>/dev/null)" != "$stamp" ]; then
  say "deltafin setup: store on $dlist"
  for d in "${drives[@]}"; do rm -rf "$d/deltafin-experts"; done
  rm -rf "$STORE" "$STORE.stamp"
  "$DF" setup --from "$CKPT" --store "$STORE" --drives "$dlist" --drive-mbps "$mbps_list" --quiet >"$OUT/setup.log" 2>&1
  echo "$stamp" >"$STORE.stamp"
fi
if [ "$(cat "$LDIR.stamp" 2>/dev/null)" != "$stamp" ]; then
  say "placing the GGUF on the drives"
  for d in "${drives[@]}"; do rm -rf "$d/oversub-llama"; done
  rm -f "$LDIR.stamp"
  mkdir -p "$LDIR"
  if [ "$DRIVES" -eq 1 ]; then
    cp "$GGUF" "$LDIR/model.gguf"
  else
    # One shard per drive: gguf-split fills a shard in file order up to the
    # size given, so 1/DRIVES of the bytes plus 400 MB (more than the largest
    # tensor, one layer's 64-expert matrix of 374 MB on the bench preset) gives
    # exactly DRIVES shards. llama.cpp finds shards by name beside the first, so
    # drive 0's directory links to the others.
    split_mb=$(( ($(stat -c %s "$GGUF") / DRIVES + 999999) / 1000000 + 400 ))
    "$BIN/llama-gguf-split" --split --split-max-size "${split_mb}M" "$GGUF" "$LLAMA_DIR/oversub-split" \
      >"$OUT/gguf-split.log" 2>&1
    shards=("$LLAMA_DIR"/oversub-split-*-of-*.gguf)
    [ ${#shards[@]} -eq "$DRIVES" ] || { echo "gguf-split made ${#shards[@]} shards, not $DRIVES" >&2; exit 1; }
    for ((i = 0; i < DRIVES; i++)); do
      name=$(basename "${shards[$i]/oversub-split/model}")
      mkdir -p "${drives[$i]}/oversub-llama"
      mv "${shards[$i]}" "${drives[$i]}/oversub-llama/$name"
      [ "$i" -eq 0 ] || ln -s "${drives[$i]}/oversub-llama/$name" "$LDIR/$name"
    done
  fi
  echo "$stamp" >"$LDIR.stamp"
fi
LGGUF=$(find "$LDIR" -maxdepth 1 \( -name model.gguf -o -name 'model-00001-of-*.gguf' \) | head -1)
sync

# 3. the cap: a third of the model's bytes (the GGUF: every weight) plus
#    EXTRA_MB for what is not weights; deltafin's expert cache is the third
#    less its spine, which it holds in RAM
model_bytes=$(stat -c %s "$GGUF")
spine_bytes=$(du -sb "$STORE/spine" | cut -f1)
third=$((model_bytes / 3))
cap=$((third + EXTRA_MB * 1048576))
CACHE_GB=${CACHE_GB:-$("$PY" -c "print(f'{($third - $spine_bytes) / 1e9:.3f}')")}

# 4. the prompt: a fixed text cut to P tokens of the checkpoint's tokenizer
"$PY" - "$P" "$DF" "$CKPT" "$OUT/prompt.txt" <<'PY'
import json, subprocess, sys
p, df, ckpt, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
words = ("the drive reads each expert once while the cache keeps what the next token will need and the "
         "router picks sixteen of sixty four experts in every layer so a third of the model in memory "
         "serves a part of each step and the rest comes from the drives at a quarter of a gigabyte a second").split()
text = " ".join(words * 8)
count = lambda k: len(json.loads(subprocess.check_output([df, "tokenize", "--model", ckpt, "--json", "--text", text[:k]])))
lo, hi = 1, len(text)
if count(hi) < p: sys.exit(f"the prompt text has fewer than {p} tokens")
while lo < hi:  # the shortest prefix with at least p tokens
    mid = (lo + hi) // 2
    lo, hi = (mid + 1, hi) if count(mid) < p else (lo, mid)
open(out, "w").write(text[:lo] + "\n")
print(f"prompt: {lo} characters, {count(lo)} tokens (deltafin's tokenizer)", file=sys.stderr)
PY

# 5. the rounds: llama.cpp, its prompt-only run, deltafin, its prompt-only run
CTX=$((P + N + 64))
llama_cmd() {  # llama_cmd NEW
  LC=("$BIN/llama-completion" -m "$LGGUF" -f "$OUT/prompt.txt" -n "$1" -c "$CTX" -t "$THREADS" -tb "$THREADS"
    --temp 0 --ignore-eos -no-cnv --no-warmup --no-display-prompt -s 1)
  # shellcheck disable=SC2206  # LLAMA_ARGS is a list of options
  LC+=($LLAMA_ARGS)
}
deltafin_cmd() {  # deltafin_cmd NEW JSON
  DB=("$DF" bench --store "$STORE" --cold --runs 1 --warmup 0 --prompts "$OUT/prompt.txt" --max-new "$1"
    --threads "$THREADS" --cache-gb "$CACHE_GB" --json "$2")
}
capped() {  # capped NAME CMD...: one run under the cap and the throttle, caches dropped
  local name=$1 load0
  shift
  load0=$(cut -d' ' -f1 /proc/loadavg)
  "$RIG/in-cgroup.sh" --mem "$cap" --stats "$OUT/$name.cgroup" -- "$@" >"$OUT/$name-stdout.txt" 2>"$OUT/$name.log" || {
    echo "run $name failed (rc $?): see $OUT/$name.log" >&2
    tail -5 "$OUT/$name.log" >&2
    exit 1
  }
  echo "$name $load0 $(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/loadavg.txt"  # 1-minute load average at start, end
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rm -f "$OUT/loadavg.txt"
for ((r = 1; r <= ROUNDS; r++)); do
  llama_cmd "$N"
  say "round $r/$ROUNDS llama.cpp: ${LC[*]}"
  capped "llama-$r" "${LC[@]}"
  llama_cmd 1
  say "round $r/$ROUNDS llama.cpp, prompt only"
  capped "llama-prompt-$r" "${LC[@]}"
  deltafin_cmd "$N" "$OUT/deltafin-$r.json"
  say "round $r/$ROUNDS deltafin: ${DB[*]}"
  capped "deltafin-$r" "${DB[@]}"
  deltafin_cmd 1 "$OUT/deltafin-prompt-$r.json"
  say "round $r/$ROUNDS deltafin, prompt only"
  capped "deltafin-prompt-$r" "${DB[@]}"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
"$RIG/drives-down.sh" >/dev/null || true
trap - EXIT

# 6. the table
llama_cmd "$N"
deltafin_cmd "$N" "$OUT/deltafin-R.json"
{
  echo "deltafin vs llama.cpp, 3x oversubscribed, K3-architecture checkpoint, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); load average before $load_before, after $load_after"
  echo "deltafin: $(deltafin_build_line "$DF")"
  echo "llama.cpp: $LLAMA_COMMIT (node-llama-cpp $NLC_VER, release $LLAMA_TAG), $BIN"
  echo "checkpoint: $CKPT${PROFILE:+ (routing profile $PROFILE)} -> $GGUF ($model_bytes bytes)"
  if [ "$DRIVES" -eq 1 ]; then
    echo "drives: 1 x $MBPS MB/s (/mnt/dfdrive0, ${loops[0]}): deltafin's store (spine and experts) and llama.cpp's GGUF on the same drive"
  else
    echo "drives: $DRIVES x $MBPS MB/s ($dlist; ${loops[*]}): deltafin striped over all; llama.cpp's GGUF split into $DRIVES shards of whole tensors in file order, one per drive"
  fi
  echo "memory cap: $cap bytes = GGUF / 3 ($third) + $EXTRA_MB MiB; deltafin --cache-gb $CACHE_GB (the third less its $spine_bytes-byte spine)"
  echo "llama.cpp command: ${LC[*]}   (prompt only: -n 1)"
  echo "deltafin command:  ${DB[*]}   (prompt only: --max-new 1)"
  echo "each run: $RIG/in-cgroup.sh --mem $cap -- CMD (caches dropped, throttled); rounds: llama.cpp, llama.cpp prompt only, deltafin, deltafin prompt only"
  echo
  "$PY" "$ROOT/bench/llama_cpp/oversub_table.py" "$OUT" "$ROUNDS" "$DRIVES" "$MBPS" "${loops[@]}"
  echo
  echo "one invocation: $(($(date +%s) - t_start)) s"
} | tee "$OUT/table.txt"
rm -f "$OUT/deltafin-R.json"
say "raw files in $OUT"
