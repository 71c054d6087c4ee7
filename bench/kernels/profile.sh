#!/usr/bin/env bash
# Where a decode step and a prefill spend their time, with every weight in
# RAM: `perf record` (cpu-clock samples, all threads) over `deltafin bench`,
# symbols put in categories (products by weight type, attention, activations,
# thread hand-offs, memory, loading) by bench/kernels/profile.py, as CPU ms per
# token beside the wall ms the bench measured. Two runs: a prefill of P tokens
# (max-new 1) and a decode of N tokens after a 4-token prompt.
#   bench/kernels/profile.sh MODEL_DIR OUT_DIR [THREADS=2] [P=128] [N=32]
# Needs perf (Debian's linux-perf) and permission to sample (root, or
# kernel.perf_event_paranoid <= 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
model="${1:?usage: $0 MODEL_DIR OUT_DIR [THREADS] [P] [N]}"
out="${2:?usage: $0 MODEL_DIR OUT_DIR [THREADS] [P] [N]}"
threads="${3:-2}" P="${4:-128}" N="${5:-32}"
bin="${DELTAFIN:-build/release/deltafin}"
mkdir -p "$out"
vocab=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print(c.get('text_config', c)['vocab_size'])" "$model/config.json")
python3 -c "import sys; n,v=int(sys.argv[1]),int(sys.argv[2]); print(','.join(str(300 + (i*37) % (v-310)) for i in range(n)))" "$P" "$vocab" > "$out/prompt-prefill.txt"
echo "300,301,302,303" > "$out/prompt-decode.txt"
for phase in prefill decode; do
  if [ $phase = prefill ]; then new=1; else new=$((N + 1)); fi
  perf record -q -e cpu-clock -F 999 -o "$out/$phase.perf" -- \
    "$bin" bench --model "$model" --threads "$threads" --prompts "$out/prompt-$phase.txt" --max-new "$new" \
    --runs 3 --warmup 1 --json "$out/$phase.json" > "$out/$phase.txt" 2>&1
  # Loading reads the weights in first: count from the first sample in a
  # forward-pass function on (perf report --time), so its page faults and
  # copies are not taken for the step's.
  # (perf script stops on the closed pipe after the first match: not a failure.)
  t0=$({ perf script -i "$out/$phase.perf" -F time,ip,sym 2>/dev/null || true; } |
    awk '/mxfp4|K3Model|Qwen3/ {sub(":", "", $1); print $1; exit}')
  perf report -i "$out/$phase.perf" --time "$t0," --sort sym --stdio -F overhead,sample,sym 2>/dev/null > "$out/$phase-symbols.txt"
  perf report -i "$out/$phase.perf" --time ",$t0" --sort sym --stdio -F overhead,sample,sym 2>/dev/null > "$out/$phase-loading.txt"
done
python3 bench/kernels/profile.py "$out" "$threads" "$P" "$N" | tee "$out/profile.md"
