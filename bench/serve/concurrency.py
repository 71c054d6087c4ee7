#!/usr/bin/env python3
"""Concurrent serving (issue 37): aggregate decode tokens/s, per-request
latency and expert bytes read per generated token for 1, 2, 4, 8 streams,
each count against a server started with --parallel equal to it; and the time
to first token of a one-word chat sent behind a long prefill, one at a time
(--parallel 1: it waits for the whole prefill) against side by side.

    bench/serve/concurrency.py --out DIR -- deltafin serve --model M [...]

The server command is given without --port and --parallel (added here). Each
stream is a completion of its own prompt (distinct prompts: no prompt reuse)
with ignore-free greedy decoding of --max-tokens tokens. Bytes read are the
server process's /proc/PID/io read_bytes over the measured requests (the
expert reads of a streamed store; 0 for a resident model). Writes
DIR/streams.json, DIR/ttft.json and DIR/table.md."""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, cmd, parallel, log):
        self.port = free_port()
        self.proc = subprocess.Popen(cmd + ["--port", str(self.port), "--parallel", str(parallel), "--served-model-name", "m"],
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 600
        while time.time() < deadline:
            try:
                self.health()
                return
            except OSError:
                time.sleep(0.2)
        raise SystemExit("the server did not come up: " + " ".join(cmd))

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def health(self):
        with urllib.request.urlopen(self.url("/health"), timeout=10) as r:
            return json.load(r)

    def read_bytes(self):
        """read_bytes of the server and every process under it (it may run
        under a wrapper such as the rig's in-cgroup.sh)."""
        children = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                    children.setdefault(ppid, []).append(int(d))
                except OSError:
                    pass
        total, todo = 0, [self.proc.pid]
        while todo:
            pid = todo.pop()
            todo += children.get(pid, [])
            try:
                with open(f"/proc/{pid}/io") as f:
                    for line in f:
                        if line.startswith("read_bytes:"):
                            total += int(line.split()[1])
            except OSError:
                pass
        return total

    def stop(self):
        # The whole group: a wrapper (the rig's in-cgroup.sh) does not pass SIGTERM on.
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=120)


def stream(server, path, body):
    """Streams one request; (ttft seconds, total seconds, tokens, decode
    tokens/s after the first token)."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(server.url(path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.time()
    ttft, tokens = None, 0
    with urllib.request.urlopen(req, timeout=3600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            j = json.loads(line[6:])
            if j.get("usage"):
                tokens = j["usage"]["completion_tokens"]
            for c in j.get("choices", []):
                d = c.get("delta") or {}
                text = c.get("text") or d.get("content") or d.get("reasoning_content")
                if text and ttft is None:
                    ttft = time.time() - t0
    total = time.time() - t0
    decode = (tokens - 1) / (total - ttft) if ttft is not None and tokens > 1 and total > ttft else 0.0
    return ttft, total, tokens, decode


def prompt(i, words):
    topics = ["harbour", "mountain", "library", "orchard", "railway", "glacier", "market", "lighthouse"]
    base = f"Story {i}: the {topics[i % len(topics)]} was quiet that morning, and "
    filler = " ".join(f"{topics[(i + k) % len(topics)]}{k}" for k in range(words))
    return base + filler + " so the"


def run_streams(cmd, n, max_tokens, prompt_words, log):
    s = Server(cmd, n, log)
    try:
        # Warm-up: one request, so the first measured ones do not pay for page faults.
        stream(s, "/v1/completions", {"model": "m", "prompt": prompt(99, prompt_words), "max_tokens": 4})
        before = s.read_bytes()
        results = [None] * n
        def one(i):
            results[i] = stream(s, "/v1/completions",
                                {"model": "m", "prompt": prompt(i, prompt_words), "max_tokens": max_tokens})
        t0 = time.time()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        read = s.read_bytes() - before
        steps = s.health().get("steps", {})
    finally:
        s.stop()
    tokens = sum(r[2] for r in results)
    # Decode throughput: each stream's tokens after its first over the time
    # they took, summed (the streams start together and decode side by side).
    decode = sum(r[3] for r in results)
    return {"streams": n, "wall_s": wall, "tokens": tokens, "tokens_per_s": tokens / wall, "decode_tokens_per_s": decode,
            "latency_s": sorted(r[1] for r in results), "ttft_s": sorted(r[0] for r in results),
            "read_bytes": read, "read_bytes_per_token": read / max(tokens, 1), "steps": steps}


def run_ttft(cmd, parallel, long_words, log):
    s = Server(cmd, parallel, log)
    try:
        long_result = {}
        def long_one():
            long_result["r"] = stream(s, "/v1/completions",
                                      {"model": "m", "prompt": prompt(0, long_words), "max_tokens": 4})
        t = threading.Thread(target=long_one)
        t.start()
        while True:  # until the long prompt is being prefilled
            h = s.health()
            if any(r["phase"] == "prefill" and r["prefill_done"] > 0 for r in h.get("running", [])):
                break
            time.sleep(0.02)
        sent = time.time()
        ttft, total, _, _ = stream(s, "/v1/chat/completions",
                                {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
        t.join()
    finally:
        s.stop()
    return {"parallel": parallel, "chat_ttft_s": ttft, "chat_total_s": total,
            "long_prompt_total_s": long_result["r"][1], "chat_sent_after_s": sent}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--streams", default="1 2 4 8")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--prompt-words", type=int, default=4)
    ap.add_argument("--long-words", type=int, default=300)
    ap.add_argument("--skip-ttft", action="store_true")
    ap.add_argument("--tables-only", action="store_true", help="write table.md again from OUT's saved figures")
    ap.add_argument("--ttft-parallel", default="1 4", help="the --parallel values of the time-to-first-token runs")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    os.makedirs(a.out, exist_ok=True)
    if a.tables_only:  # the tables again from the saved figures
        load = lambda name: json.load(open(os.path.join(a.out, name))) if os.path.exists(os.path.join(a.out, name)) else []
        streams, ttft = load("streams.json"), load("ttft.json")
    else:
        log = open(os.path.join(a.out, "server.log"), "w")
        streams = [run_streams(cmd, int(n), a.max_tokens, a.prompt_words, log) for n in a.streams.split()]
        if streams:
            json.dump(streams, open(os.path.join(a.out, "streams.json"), "w"), indent=1)
        ttft = [] if a.skip_ttft else [run_ttft(cmd, int(p), a.long_words, log) for p in a.ttft_parallel.split()]
        if ttft:
            json.dump(ttft, open(os.path.join(a.out, "ttft.json"), "w"), indent=1)
    table = tables(streams, ttft)
    open(os.path.join(a.out, "table.md"), "w").write(table)
    sys.stdout.write(table)


def tables(streams, ttft):
    rows = []
    if streams:
        solo = streams[0]
        rows += ["| streams | decode tokens/s, all streams | × 1 stream | tokens/s incl. prefill | × 1 stream | median latency s | "
                 "max latency s | GB read per token | × 1 stream | most requests in one step |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
    for r in streams:
        lat = r["latency_s"]
        # Bytes read per generated token count the prompts' reads too.
        ratio_b = r["read_bytes_per_token"] / solo["read_bytes_per_token"] if solo["read_bytes_per_token"] else float("nan")
        parts = str(r["steps"]["max_parts"]) if r["steps"].get("max_parts") else "- (one at a time)"
        rows.append(f"| {r['streams']} | {r['decode_tokens_per_s']:.3f} | {r['decode_tokens_per_s'] / solo['decode_tokens_per_s']:.2f} | "
                    f"{r['tokens_per_s']:.3f} | {r['tokens_per_s'] / solo['tokens_per_s']:.2f} | "
                    f"{lat[len(lat) // 2]:.2f} | {lat[-1]:.2f} | {r['read_bytes_per_token'] / 1e9:.3f} | {ratio_b:.2f} | {parts} |")
    if ttft:
        rows += ["", "| server | one-word chat's time to first token behind a long prefill (s) | its total (s) | the long prompt's total (s) |",
                 "|---|---|---|---|"]
    for r in ttft:
        rows.append(f"| --parallel {r['parallel']} | {r['chat_ttft_s']:.2f} | {r['chat_total_s']:.2f} | {r['long_prompt_total_s']:.2f} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
