#!/usr/bin/env python3
"""Time to first token of a prompt that shares a long prefix, through `deltafin serve`.

    bench/context/prefix_ttft.py MODEL_DIR [PREFIX_TOKENS] [THREADS]   (defaults 4096, 1)

A server with prompt states on disk (a fresh --prompt-cache-dir) answers, with
max_tokens 1 (so the time is the prefill and one token):
  cold      prompt A = the shared prefix + tail 1: nothing kept
  ram       A again: the RAM prompt cache restores all but one position
  disk      B = the prefix + tail 2: the state at A's last whole block, from disk
  restart   the server restarted, C = the prefix + tail 3: from disk again
Each answer must be the same as a server without any prompt cache gives for
that prompt (checked). Prints one line per case: seconds, cached tokens.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DF = os.path.join(ROOT, "build", "release", "deltafin")


def start(model, extra, threads):
    p = subprocess.Popen([DF, "serve", "--model", model, "--served-model-name", "m", "--port", "0",
                          "--threads", str(threads)] + extra,
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in p.stderr:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return p, int(m.group(1))
    raise SystemExit("the server did not start")


def complete(port, ids):
    body = json.dumps({"model": "m", "prompt": ids, "max_tokens": 1}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    t = time.monotonic()
    with urllib.request.urlopen(req, timeout=3600) as r:
        answer = json.loads(r.read())
    return time.monotonic() - t, answer


def main():
    model = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    prefix = [100 + (i * 13) % 600 for i in range(n)]
    prompts = {k: prefix + [100 + (i * 7 + k) % 600 for i in range(64)] for k in (1, 2, 3)}
    states = tempfile.mkdtemp(prefix="df-prefix-states-")

    ref = {}
    p, port = start(model, ["--prompt-cache-slots", "0", "--prompt-cache-disk-gb", "0"], threads)
    for k, ids in prompts.items():
        ref[k] = complete(port, ids)[1]["choices"]
    p.terminate(), p.wait()

    rows = []
    p, port = start(model, ["--prompt-cache-dir", states], threads)
    for case, k in (("cold", 1), ("ram", 1), ("disk", 2)):
        s, a = complete(port, prompts[k])
        assert a["choices"] == ref[k], (case, a["choices"], ref[k])
        rows.append((case, s, a["usage"]["prompt_tokens"], a["usage"]["prompt_tokens_details"]["cached_tokens"]))
    p.terminate(), p.wait()
    p, port = start(model, ["--prompt-cache-dir", states], threads)
    s, a = complete(port, prompts[3])
    assert a["choices"] == ref[3], ("restart", a["choices"], ref[3])
    rows.append(("restart", s, a["usage"]["prompt_tokens"], a["usage"]["prompt_tokens_details"]["cached_tokens"]))
    p.terminate(), p.wait()

    print(f"# prefix_ttft {model}: shared prefix {n} tokens + 64, max_tokens 1, {threads} thread(s); answers equal "
          f"a server without prompt caches")
    print(f"{'case':8} {'seconds':>9} {'vs cold':>8} {'prompt':>7} {'cached':>7}")
    cold = rows[0][1]
    for case, s, prompt, cached in rows:
        print(f"{case:8} {s:9.3f} {s / cold:8.3f} {prompt:7d} {cached:7d}")


if __name__ == "__main__":
    main()
