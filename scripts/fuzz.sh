#!/usr/bin/env bash
# Builds the libFuzzer targets in the sanitizer build (scripts/build.sh asan:
# clang-14, ASan + UBSan; nothing to do when it is built already) and runs
# them all within TOTAL seconds of wall-clock time (default 80):
#   request         request validation (server/api)
#   http            the HTTP/1.x request parser (server/http)
#   safetensors     .safetensors headers against the file's size (format)
#   config          config.json of every model family (model/*/config)
#   tiktoken        K3's tiktoken.model + tokenizer_config.json, and the tokenizer
#   hf_tokenizer    a Hugging Face tokenizer.json, and the tokenizer
#   store_manifest  store.json (store)
#   mirror          a mirror's replies and SHA256SUMS (remote)
# Each libFuzzer process uses one core, so the targets run as many at a time
# as there are cores and share the budget evenly: each gets
# TOTAL x cores / targets seconds, at least 15 (the budget grows to fit
# that). CI runs `scripts/fuzz.sh 80` on 2 cores: 20 s per target.
# Each target starts from a copy of its seed corpus fuzz/corpus/<name> (the
# tracked corpus is never written) with the dictionary fuzz/<name>.dict. An
# input that allocates more than 64 MB at once (a size taken from the file
# before it was checked) or runs for 20 s counts as a crash. The exit status
# is non-zero when any target found a crash, whose input it leaves in
# build/asan/fuzz-runs/artifacts/ and whose log it prints.
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-80}
targets=(request http safetensors config tiktoken hf_tokenizer store_manifest mirror)
scripts/build.sh asan "${targets[@]/#/fuzz_}"
bin=build/asan/fuzz
build=build/asan/fuzz-runs
mkdir -p "$build/artifacts" "$build/logs"

jobs=$(nproc)
(( jobs > ${#targets[@]} )) && jobs=${#targets[@]}
seconds=$(( total * jobs / ${#targets[@]} ))
(( seconds < 15 )) && seconds=15
echo "== fuzzing ${#targets[@]} targets, $jobs at a time, $seconds s each (budget $total s) =="

# Leaks are bugs too; UBSan aborts (the targets build with -fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_target() {
  local target=$1 corpus="$build/corpus/$1"
  mkdir -p "$corpus"
  cp -f fuzz/corpus/$target/* "$corpus"/
  "$bin/fuzz_$target" -max_total_time="$seconds" -max_len=65536 -malloc_limit_mb=64 -timeout=20 \
    -print_final_stats=1 -dict=fuzz/$target.dict -artifact_prefix="$build/artifacts/$target-" "$corpus" \
    >"$build/logs/$target.log" 2>&1
}

# The log of a finished target: its final stats, or all of it after a crash.
report() {
  local target=$1 rc=$2 log="$build/logs/$1.log"
  if (( rc == 0 )); then
    echo "== fuzz_$target: $(grep -E $'^#[0-9]+[ \t]+DONE' "$log" | tail -1)"
    grep '^stat::' "$log" | tr '\n' ' '
    echo
  else
    echo "== fuzz_$target FAILED (exit $rc); its log:"
    cat "$log"
  fi
}

status=0
declare -A pid_target=()
for target in "${targets[@]}"; do
  while (( ${#pid_target[@]} >= jobs )); do
    rc=0
    wait -n -p done_pid "${!pid_target[@]}" || rc=$?
    report "${pid_target[$done_pid]}" "$rc"
    (( rc == 0 )) || status=$rc
    unset "pid_target[$done_pid]"
  done
  run_target "$target" &
  pid_target[$!]=$target
done
while (( ${#pid_target[@]} > 0 )); do
  rc=0
  wait -n -p done_pid "${!pid_target[@]}" || rc=$?
  report "${pid_target[$done_pid]}" "$rc"
  (( rc == 0 )) || status=$rc
  unset "pid_target[$done_pid]"
done
exit "$status"
