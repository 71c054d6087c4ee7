#!/usr/bin/env bash
# The demo: install, build, generate a small K3-architecture checkpoint with
# RANDOM weights, validate it, turn it into a deltafin store whose experts are
# striped over three directories (standing in for three drives), check the
# store, and generate with the experts streamed from it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release deltafin  # only the binary: the tests are scripts/test.sh's
bin=build/release/deltafin
model=demo-model
store=demo-store
drives=demo-drives/d0,demo-drives/d1,demo-drives/d2

echo
echo "== 1. generate a small checkpoint in the real Hugging Face K3 layout (random weights) =="
$bin make-model --out "$model" --preset small --seed 1 --force
echo
echo "== 2. load and validate it (config rules, every tensor's dtype and shape, MXFP4 scales) =="
$bin inspect --model "$model" --verify-experts
echo
echo "== 3. render a chat prompt with the K3 template and tokenize it =="
$bin tokenize --model "$model" --chat --render --text "What is the capital of France?"
echo
echo "== 4. build a store: spine in RAM-ready files, every expert striped over 3 'drives' (as setup does for real models) =="
rm -rf "$store" demo-drives
mkdir -p demo-drives/d0 demo-drives/d1 demo-drives/d2
# (--layout striped: auto stripes only records of 1 MiB per drive or more, and this model's are 20 KB)
$bin setup --from "$model" --store "$store" --drives "$drives" --layout striped
$bin doctor --store "$store" --full
echo
echo "== 5. generate 32 tokens with the experts streamed from the store (direct I/O, cache, lookahead) =="
$bin run --store "$store" --chat --prompt "What is the capital of France?" --max-new 32 --ignore-eos --stats --cache-gb 0.005
echo
echo "== 6. exactness: streamed logits, decoded one token at a time, equal the all-resident ones bit for bit =="
$bin logits --model "$model" --tokens 300,301,302,303,304,305 --out demo-resident.npy
$bin logits --store "$store" --tokens 300,301,302,303,304,305 --step 1 --cache-gb 0 --out demo-streamed.npy
cmp demo-resident.npy demo-streamed.npy && echo "identical: $(stat -c %s demo-streamed.npy) bytes"
echo
echo "== 7. serve the store over the OpenAI API on loopback; one chat request, streamed as server-sent events =="
$bin serve --store "$store" --port 0 --cache-gb 0.005 2> demo-serve.log &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "listening on" demo-serve.log && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' demo-serve.log | head -1)
echo "server at $url"
curl -sS "$url/v1/models"; echo
curl -sSN "$url/v1/chat/completions" -H "Content-Type: application/json" \
  -d '{"model": "demo-store", "messages": [{"role": "user", "content": "What is the capital of France?"}],
       "max_tokens": 6, "stream": true, "stream_options": {"include_usage": true}}'
kill $serve_pid; wait $serve_pid || true
trap - EXIT
echo
echo "== 8. stream from a mirror: nginx serves the checkpoint on loopback; setup --stream moves only the spine =="
rm -rf demo-mirror demo-stream-store demo-stream-drives
mkdir -p demo-mirror/logs demo-mirror/tmp demo-stream-drives/d0 demo-stream-drives/d1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > demo-mirror/nginx.conf <<NGINX
daemon off; master_process off; pid $PWD/demo-mirror/nginx.pid; error_log $PWD/demo-mirror/logs/error.log;
events {}
http {
  access_log $PWD/demo-mirror/logs/access.log;
  client_body_temp_path $PWD/demo-mirror/tmp; proxy_temp_path $PWD/demo-mirror/tmp; fastcgi_temp_path $PWD/demo-mirror/tmp;
  uwsgi_temp_path $PWD/demo-mirror/tmp; scgi_temp_path $PWD/demo-mirror/tmp;
  server { listen 127.0.0.1:$port; root $PWD; }
}
NGINX
/usr/sbin/nginx -p "$PWD/demo-mirror" -c "$PWD/demo-mirror/nginx.conf" -e "$PWD/demo-mirror/logs/error.log" &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/$model/config.json" && break; sleep 0.1; done
$bin setup --source "http://127.0.0.1:$port/$model" --stream --store demo-stream-store \
  --drives demo-stream-drives/d0,demo-stream-drives/d1 --disk-budget 0.01
echo "-- experts are fetched from the mirror as they are needed; at most 10 MB of them are kept on the drives (the coldest are evicted)"
$bin run --store demo-stream-store --chat --prompt "What is the capital of France?" --max-new 8 --ignore-eos --stats \
  --cache-gb 0.005 2>&1 | grep -E "^(mirror|decode|prefill):" || true
$bin logits --store demo-stream-store --tokens 300,301,302,303,304,305 --step 1 --cache-gb 0 --out demo-mirror.npy
cmp demo-resident.npy demo-mirror.npy && echo "streamed from the mirror, identical: $(stat -c %s demo-mirror.npy) bytes"
kill $nginx_pid; wait $nginx_pid || true
trap - EXIT
echo
echo "Note: the weights are random, so this model has K3's shape but no knowledge: the text is noise."
