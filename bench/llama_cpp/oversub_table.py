#!/usr/bin/env python3
"""The table of oversub.sh: per round, llama.cpp and deltafin side by side and
the ratio deltafin / llama.cpp, then the median ratio of the rounds.

    oversub_table.py OUT ROUNDS DRIVES MBPS LOOP...

OUT holds, per round R: llama-R.{log,cgroup}, llama-prompt-R.{log,cgroup}
(llama-completion's stderr and in-cgroup.sh's KEY=VALUE stats), deltafin-R.json,
deltafin-prompt-R.json (deltafin bench --json) and their .cgroup files. LOOP...
are the drives' loop devices: the bytes they read during a run (their own
counters, dev_read_bytes_loopN) are the run's drive bytes.

Drive bytes per decode token = (bytes of the full run - bytes of the prompt-only
run) / (decode steps of the full run - of the prompt-only run): the prompt-only
run loads the model and processes the same prompt from the same cold state.
"""
import json
import os
import re
import statistics
import sys


def fail(msg):
    sys.exit(f"oversub_table.py: {msg}")


def cgroup_stats(path):
    if not os.path.exists(path):
        fail(f"{path}: missing (did the run start?)")
    kv = {}
    for line in open(path):
        k, _, v = line.strip().partition("=")
        kv[k] = v
    return kv


def drive_bytes(kv, loops, path):
    total = 0
    for loop in loops:
        key = "dev_read_bytes_" + os.path.basename(loop)
        if key not in kv:
            fail(f"{path}: no {key} (is {loop} one of the rig's drives?)")
        total += int(kv[key])
    return total


def llama_timings(path):
    """llama.cpp's own figures: prompt eval time and tokens, eval time and runs
    (its perf lines), and the model load: the time stamp of its 'generate:' line
    (minutes.seconds.ms.us since the process started logging), printed once the
    model and context are ready. Its perf line 'load time' is not the model's
    load: it runs from the context's creation to the end of the first eval."""
    text = open(path, errors="replace").read()
    def grab(pattern, what):
        m = re.findall(pattern, text, re.M)
        if not m:
            fail(f"{path}: no '{what}' line (llama-completion's log)")
        return m[-1]
    pe_ms, pe_tok = grab(r"prompt eval time\s*=\s*([\d.]+) ms /\s*(\d+) tokens", "prompt eval time")
    ev_ms, ev_runs = grab(r"\beval time\s*=\s*([\d.]+) ms /\s*(\d+) runs", "eval time")
    mi, se, ms, us = grab(r"^(\d+)\.(\d+)\.(\d+)\.(\d+) I generate:", "generate:")
    # llama_perf_context reports max(1, n_eval) runs: a run that generated one
    # token (its prompt's) shows "0.00 ms / 1 runs" and made no eval.
    runs = int(ev_runs) if float(ev_ms) > 0 else 0
    ready_s = int(mi) * 60 + int(se) + int(ms) / 1e3 + int(us) / 1e6
    return {"load_s": ready_s, "prompt_s": float(pe_ms) / 1e3, "prompt_tokens": int(pe_tok),
            "eval_s": float(ev_ms) / 1e3, "eval_runs": runs}


def deltafin_run(path):
    j = json.load(open(path))
    runs = [r for r in j["runs_detail"] if not r["warmup"]]
    if len(runs) != 1:
        fail(f"{path}: {len(runs)} measured runs, expected 1")
    r = runs[0]
    if not r["correct"]:
        fail(f"{path}: the run's tokens differ from the reference run's")
    p = r["prompts"][0]
    steps = [s for s in p["steps"] if not s["prefill"]]
    return {"load_s": r["load_s"], "ttft_s": p["ttft_ms"] / 1e3, "prompt_tokens": len(j["prompts"][0]["ids"]),
            "decode_steps": len(steps), "decode_s": sum(s["ms"] for s in steps) / 1e3,
            "own_bytes": sum(s["bytes_read"] for s in steps),
            "demanded": sum(s["demanded"] for s in steps), "hits": sum(s["hits"] for s in steps),
            "tps": r["metrics"]["decode_tokens_per_s"]}


def main():
    if len(sys.argv) < 6:
        fail("usage: oversub_table.py OUT ROUNDS DRIVES MBPS LOOP...")
    out, rounds, drives, mbps, loops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]
    bandwidth = drives * mbps * 1e6
    warnings = []
    load = {}  # run name: "start/end" 1-minute load average (oversub.sh's loadavg.txt)
    if os.path.exists(f"{out}/loadavg.txt"):
        for line in open(f"{out}/loadavg.txt"):
            name, start, end = line.split()
            load[name] = f"{start}/{end}"
    rows = []  # per round: {metric: (llama, deltafin)}
    extra = []
    for r in range(1, rounds + 1):
        lf, lp = (f"{out}/llama-{r}", f"{out}/llama-prompt-{r}")
        df, dp = (f"{out}/deltafin-{r}", f"{out}/deltafin-prompt-{r}")
        lt, ltp = llama_timings(lf + ".log"), llama_timings(lp + ".log")
        dt, dtp = deltafin_run(df + ".json"), deltafin_run(dp + ".json")
        kv = {k: cgroup_stats(k + ".cgroup") for k in (lf, lp, df, dp)}
        b = {k: drive_bytes(kv[k], loops, k + ".cgroup") for k in kv}
        l_steps = lt["eval_runs"] - ltp["eval_runs"]
        d_steps = dt["decode_steps"] - dtp["decode_steps"]
        if l_steps <= 0 or d_steps <= 0:
            fail(f"round {r}: no decode steps beyond the prompt-only run (llama.cpp {l_steps}, deltafin {d_steps})")
        l_bpt = (b[lf] - b[lp]) / l_steps
        d_bpt = (b[df] - b[dp]) / d_steps
        l_tps = lt["eval_runs"] / lt["eval_s"]
        d_tps = dt["tps"]
        row = {
            "decode tokens/s": (l_tps, d_tps),
            "drive GB per decode token": (l_bpt / 1e9, d_bpt / 1e9),
            "decode drive MB/s": (l_bpt * l_tps / 1e6, d_bpt * d_tps / 1e6),
            "  of the drives' MB/s": (l_bpt * l_tps / bandwidth, d_bpt * d_tps / bandwidth),
            "TTFT s (prompt to 1st token)": (lt["prompt_s"], dt["ttft_s"]),
            "model load s": (lt["load_s"], dt["load_s"]),
            "launch to 1st token s": (lt["load_s"] + lt["prompt_s"], dt["load_s"] + dt["ttft_s"]),
            "drive GB, prompt-only run": (b[lp] / 1e9, b[dp] / 1e9),
            "drive GB, whole run": (b[lf] / 1e9, b[df] / 1e9),
            "peak memory GiB (memory cgroup)": (int(kv[lf]["mem_peak_bytes"]) / 2**30, int(kv[df]["mem_peak_bytes"]) / 2**30),
            "prompt tokens": (lt["prompt_tokens"], dt["prompt_tokens"]),
            "decode steps (full - prompt-only)": (l_steps, d_steps),
        }
        if f"llama-{r}" in load:
            row["load average, full run's start/end"] = (load[f"llama-{r}"], load[f"deltafin-{r}"])
        rows.append(row)
        for tool, frac in (("llama.cpp", row["  of the drives' MB/s"][0]), ("deltafin", row["  of the drives' MB/s"][1])):
            if frac > 1.05:
                warnings.append(f"round {r}: {tool}'s decode bytes / decode time is {frac:.2f} of the drives' bandwidth: "
                                "the prompt-only run read fewer bytes before decoding than the full run did, so its "
                                "subtraction overstates bytes per token")
        extra.append((d_bpt, dt["own_bytes"] / max(1, dt["decode_steps"]), dt["hits"] / max(1, dt["demanded"])))
        for k in (lf, df):
            if kv[k].get("oom_kills", "0") != "0":
                fail(f"{k}: OOM-killed under the cap")

    ratio_metrics = ["decode tokens/s", "drive GB per decode token", "TTFT s (prompt to 1st token)",
                     "launch to 1st token s"]
    print(f"{'round':<6}{'metric':<36}{'llama.cpp':>12}{'deltafin':>12}{'deltafin/llama.cpp':>20}")
    def fmt(v):
        if isinstance(v, str):
            return f"{v:>12}"
        return f"{v:>12d}" if isinstance(v, int) else f"{v:>12.3f}"
    for r, row in enumerate(rows, 1):
        for name, (lv, dv) in row.items():
            ratio = f"{dv / lv:>20.3f}" if name in ratio_metrics and lv else ""
            print(f"{r:<6}{name:<36}{fmt(lv)}{fmt(dv)}{ratio}")
    print()
    for name in ratio_metrics:
        ratios = [row[name][1] / row[name][0] for row in rows]
        print(f"{'all':<6}{name:<36}{'':>24}{statistics.median(ratios):>20.3f}  (median of {len(rows)} rounds: "
              + ", ".join(f"{x:.3f}" for x in ratios) + ")")
    print()
    print("deltafin's own count (its reader, decode steps of the full run): expert GB per decode token "
          + ", ".join(f"{o / 1e9:.3f}" for _, o, _ in extra) + " against the drives' "
          + ", ".join(f"{d / 1e9:.3f}" for d, _, _ in extra) + "; cache hit rate "
          + ", ".join(f"{h:.3f}" for _, _, h in extra))
    for w in warnings:
        print("WARNING: " + w)
    print("decode tokens/s: llama.cpp eval runs / eval time (its perf lines), deltafin decode steps / their time;")
    print("  TTFT: llama.cpp's prompt eval time, deltafin's ttft_ms (prefill and first token), model load excluded;")
    print("  model load: llama.cpp from its start to its 'generate:' log line (mmap with MAP_POPULATE: the whole file is read")
    print("  once through the cap), deltafin bench --cold's load_s; launch to 1st token = model load + TTFT;")
    print("  drive bytes: the drives' loop devices, whole process (weights, spine, GGUF metadata), cold start")


if __name__ == "__main__":
    main()
