#!/usr/bin/env bash
# Where the CPU goes during one streamed prefill: deltafin's own user and
# system time (getrusage via /usr/bin/time) against the whole machine's
# (/proc/stat), so the loop-device rig's kernel work is visible. Uses the
# store bench/prefill/run.sh built; brings its drives up again.
#   sudo bench/prefill/cpu_split.sh [P=128] [N=2] [MBPS=400] [MEM=1800M]
set -euo pipefail
P=${1:-128}
N=${2:-2}
MBPS=${3:-400}
MEM=${4:-1800M}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RIG=${DFBENCH_RIG:-$ROOT/../shared/bench}
DF=$ROOT/build/release/deltafin
WORK=${DFBENCH_WORK:-/var/tmp/df}
OUT=$ROOT/bench/results/$(date +%Y-%m-%d)-prefill-cpu
mkdir -p "$OUT"
trap '"$RIG/drives-down.sh" >/dev/null 2>&1 || true' EXIT
"$RIG/drives-up.sh" "$N" "$MBPS" >/dev/null
ids=$(python3 -c "import sys; n=int(sys.argv[1]); print(','.join(str(300 + (i * 37) % 700) for i in range(n)))" "$P")
stat() { head -1 /proc/stat; }
for mode in stream resident; do
  before=$(stat)
  if [ $mode = stream ]; then
    /usr/bin/time -f "deltafin user_s=%U sys_s=%S wall_s=%e" "$RIG/in-cgroup.sh" --mem "$MEM" -- "$DF" run \
        --store "$WORK/prefill-store" --prompt-ids "$ids" --max-new 1 --stats --cache-gb 1.0 --threads 2 \
        >"$OUT/$mode-$P.log" 2>&1
  else
    /usr/bin/time -f "deltafin user_s=%U sys_s=%S wall_s=%e" "$DF" run --model "$WORK/bench" --prompt-ids "$ids" \
        --max-new 1 --stats --threads 2 >"$OUT/$mode-$P.log" 2>&1
  fi
  after=$(stat)
  python3 - "$before" "$after" >>"$OUT/$mode-$P.log" <<'PY'
import sys
b = [int(x) for x in sys.argv[1].split()[1:]]
a = [int(x) for x in sys.argv[2].split()[1:]]
names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
hz = 100.0
print("machine " + " ".join(f"{n}_s={(a[i] - b[i]) / hz:.2f}" for i, n in enumerate(names)))
PY
  grep -E "prefill [0-9.]+ ms|user_s|machine" "$OUT/$mode-$P.log"
done
