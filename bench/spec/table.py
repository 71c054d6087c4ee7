#!/usr/bin/env python3
"""Tables of bench/spec/run.sh: per arm, decode tokens/s, expert bytes read
per emitted token, tokens per verification, the speedup over plain decoding
of the same repetition and, for streamed arms, the I/O bound on it:
    bound = tokens emitted per verification x plain bytes per token
            / bytes read per verification
(what speculation can gain when a round costs its union of experts)."""
import json
import os
import statistics
import sys

out, reps, ks = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()


def load(name):
    with open(os.path.join(out, name + ".json")) as f:
        j = json.load(f)
    decode = [s for s in j["steps"] if not s["prefill"]]
    tokens = j["generated_tokens"] - 1  # the first token comes with the prefill
    spec = j["spec"]
    rounds = [s for s in decode if s["positions"] > 1]
    return {
        "tok_s": tokens / (j["decode_ms"] / 1e3),
        "bytes_tok": sum(s["bytes_read"] for s in decode) / tokens,
        "rounds": spec["rounds"],
        "tok_round": spec["round_tokens"] / spec["rounds"] if spec["rounds"] else 0.0,
        "bytes_round": sum(s["bytes_read"] for s in rounds) / len(rounds) if rounds else 0.0,
        "accepted": spec["accepted"], "drafted": spec["drafted"],
        "by_k": spec["rounds_by_k"],
    }


def row(arm, r, plain, streamed):
    a = load(f"{arm}-{r}")
    speed = a["tok_s"] / plain["tok_s"]
    cells = [arm, f"{a['tok_s']:.3f}", f"{speed:.2f}", f"{a['bytes_tok'] / 1e6:.0f}",
             f"{a['tok_round']:.2f}", f"{a['accepted']}/{a['drafted']}"]
    if streamed:
        bound = a["tok_round"] * plain["bytes_tok"] / a["bytes_round"] if a["bytes_round"] else 1.0
        cells += [f"{a['bytes_round'] / 1e6:.0f}", f"{bound:.2f}", f"{speed / bound:.2f}"]
    used = ", ".join(f"k{k}:{n}" for k, n in enumerate(a["by_k"]) if n)
    return "| " + " | ".join(cells + [used or "-"]) + " |", speed, (speed / bound if streamed else None)


def have(name):
    return os.path.exists(os.path.join(out, name + ".json"))


arms = [f"oracle-k{k}" for k in ks] + ["oracle-auto", "ngram"]
for r in range(1, reps + 1):
    if not have(f"plain-{r}"):
        break
    plain = load(f"plain-{r}")
    print(f"\n## Streamed, repetition {r}: plain {plain['tok_s']:.3f} tokens/s, "
          f"{plain['bytes_tok'] / 1e6:.0f} MB read per token\n")
    print("| arm | tokens/s | speedup | MB/token | tokens/verification | accepted/drafted "
          "| MB/verification | bound | speedup/bound | rounds by k |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for arm in arms:
        print(row(arm, r, plain, True)[0])

for r in range(1, reps + 1):
    if not have(f"resident-plain-{r}"):
        break
    plain = load(f"resident-plain-{r}")
    print(f"\n## All experts resident (compute-bound), repetition {r}: plain {plain['tok_s']:.3f} tokens/s\n")
    print("| arm | tokens/s | speedup | MB/token | tokens/verification | accepted/drafted | rounds by k |")
    print("|---|---|---|---|---|---|---|")
    for arm in [f"resident-oracle-k{k}" for k in ks] + ["resident-oracle-auto"]:
        print(row(arm, r, plain, False)[0])
