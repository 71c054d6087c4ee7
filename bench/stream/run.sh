#!/usr/bin/env bash
# setup --stream / --full against a local nginx mirror of the bench checkpoint
# (issue 9): bytes setup moves vs the whole checkpoint, fetch throughput by
# number of download threads against a local `setup --from` copy of the same
# experts (the same install path: write, fsync, read back, hash), and a
# streamed store's logits against the local store's (cmp).
#
#   bench/stream/run.sh [OUT_DIR]      (default bench/results/<date>-stream)
#
# Drives are plain directories under $WORK (no throttling): the mirror is on
# loopback, so what is measured is deltafin's fetch path, not a network.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
[ -x "$DF" ] || { echo "build first: scripts/build.sh release" >&2; exit 1; }
[ -f "$CKPT/config.json" ] || "$DF" make-model --preset bench --out "$CKPT"
out=${1:-$ROOT/bench/results/$(date +%F)-stream}
mkdir -p "$out"
scratch=$WORK/stream-bench
rm -rf "$scratch"; mkdir -p "$scratch/nginx/tmp"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$scratch/nginx/nginx.conf" <<NGINX
daemon off; master_process off; pid $scratch/nginx/pid; error_log $scratch/nginx/error.log;
events {}
http {
  log_format bytes '\$request \$status \$body_bytes_sent';
  access_log $scratch/nginx/access.log bytes;
  client_body_temp_path $scratch/nginx/tmp; proxy_temp_path $scratch/nginx/tmp; fastcgi_temp_path $scratch/nginx/tmp;
  uwsgi_temp_path $scratch/nginx/tmp; scgi_temp_path $scratch/nginx/tmp;
  server { listen 127.0.0.1:$port; root $(dirname "$CKPT"); }
}
NGINX
/usr/sbin/nginx -p "$scratch/nginx" -c "$scratch/nginx/nginx.conf" -e "$scratch/nginx/error.log" &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null || true' EXIT
url=http://127.0.0.1:$port/$(basename "$CKPT")
for _ in $(seq 100); do curl -sf -o /dev/null "$url/config.json" && break; sleep 0.1; done
log_bytes() { awk '{s += $NF; n++} END {printf "%d requests, %d body bytes\n", n, s}' "$scratch/nginx/access.log"; }
fresh() { rm -rf "$scratch/$1"; mkdir -p "$scratch/$1/d0" "$scratch/$1/d1"; }

{
  echo "# setup --stream of $CKPT ($(du -sb "$CKPT" | cut -f1) bytes) from $url"
  : >"$scratch/nginx/access.log"
  fresh s
  /usr/bin/time -f "wall %e s, max RSS %M kB" "$DF" setup --source "$url" --stream --store "$scratch/s/store" \
    --drives "$scratch/s/d0,$scratch/s/d1" --drive-mbps 1000,1000 --quiet 2>&1
  echo "nginx: $(log_bytes)"
  for threads in 1 2 4; do
    echo "# prefetch --all, --fetch-threads $threads"
    rm -rf "$scratch/s/d0/deltafin-experts" "$scratch/s/d1/deltafin-experts" "$scratch/s/store/remote/hashes.bin"
    sync; echo 3 >/proc/sys/vm/drop_caches || true
    /usr/bin/time -f "wall %e s, max RSS %M kB" "$DF" prefetch --store "$scratch/s/store" --all \
      --fetch-threads "$threads" --quiet 2>&1
  done
  echo "# the same experts copied from the local checkpoint: setup --from (--threads 2)"
  fresh l
  sync; echo 3 >/proc/sys/vm/drop_caches || true
  /usr/bin/time -f "wall %e s, max RSS %M kB" "$DF" setup --from "$CKPT" --store "$scratch/l/store" \
    --drives "$scratch/l/d0,$scratch/l/d1" --drive-mbps 1000,1000 --threads 2 --quiet 2>&1 | grep -E "ready|wall"
  echo "# a run on a fresh streamed store (every expert fetched on first use) vs the local store: same tokens?"
  fresh r
  "$DF" setup --source "$url" --stream --store "$scratch/r/store" --drives "$scratch/r/d0,$scratch/r/d1" \
    --drive-mbps 1000,1000 --quiet >/dev/null
  args=(--prompt-ids 300,301,302,303,304,305,306,307 --max-new 4 --ignore-eos --cache-gb 1 --threads 2)
  "$DF" run --store "$scratch/r/store" "${args[@]}" --stats --stats-json "$out/streamed-run.json" \
    >"$out/streamed-run.txt" 2>&1
  grep -E "^(mirror|decode|prefill):" "$out/streamed-run.txt"
  echo "# logits of 8 positions: a fresh streamed store (fetching) vs the local store, byte for byte"
  fresh r
  "$DF" setup --source "$url" --stream --store "$scratch/r/store" --drives "$scratch/r/d0,$scratch/r/d1" \
    --drive-mbps 1000,1000 --quiet >/dev/null
  "$DF" logits --store "$scratch/r/store" --tokens 300,301,302,303,304,305,306,307 --cache-gb 1 --out "$scratch/a.npy" >/dev/null
  "$DF" logits --store "$scratch/l/store" --tokens 300,301,302,303,304,305,306,307 --cache-gb 1 --out "$scratch/b.npy" >/dev/null
  cmp "$scratch/a.npy" "$scratch/b.npy" && echo "logits identical ($(stat -c %s "$scratch/a.npy") bytes)"
} 2>&1 | tee "$out/run.txt"
rm -rf "$scratch"
