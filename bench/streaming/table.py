#!/usr/bin/env python3
"""Tables for bench/streaming/run.sh: one row per drive count N.

Usage: table.py RESULTS_DIR MBPS [N1_RESULTS_DIR]
Ratios (each measured in the same session):
  agg/fio      achieved decode read bandwidth / fio's aggregate on the same N drives
  scaling      achieved bandwidth at N / (N x achieved bandwidth at N=1)
  s/floor      decode seconds per token / (bytes read per token / fio bandwidth)
  s/need-floor the same with only the bytes the model needed (misses + in-flight prefetches)
"""
import json, os, sys

out, mbps = sys.argv[1], float(sys.argv[2])
rows = []
for n in range(1, 5):
    fio_p, run_p = f"{out}/fio-{n}.json", f"{out}/run-{n}.json"
    if not (os.path.exists(fio_p) and os.path.exists(run_p)):
        continue
    fio = json.load(open(fio_p))
    fio_bw = sum(j["read"]["bw_bytes"] for j in fio["jobs"])
    run = json.load(open(run_p))
    dec = [s for s in run["steps"] if not s["prefill"]]
    t = sum(s["ms"] for s in dec) / 1e3
    b = sum(s["bytes_read"] for s in dec)
    need = sum(s["misses"] + s["inflight"] for s in dec) * run["expert_bytes"]
    dem = sum(s["demanded"] for s in dec)
    hits = sum(s["hits"] for s in dec)
    ph, pa = sum(s["pilot_hits"] for s in dec), sum(s["pilot_actual"] for s in dec)
    cg = {}
    if os.path.exists(f"{out}/cgroup-run-{n}.txt"):
        for line in open(f"{out}/cgroup-run-{n}.txt"):
            k, _, v = line.strip().partition("=")
            cg[k] = v
    rows.append(dict(n=n, fio=fio_bw, tok_s=len(dec) / t, s_tok=t / len(dec), bytes_tok=b / len(dec),
                     agg=b / t, need_tok=need / len(dec), hit=hits / max(dem, 1),
                     recall=ph / pa if pa else 0, rss=run["peak_rss_bytes"],
                     budget=run["spine_bytes"] + run["cache_bytes"] + run["pinned_bytes"],
                     cg_peak=int(cg.get("mem_peak_bytes", 0)), cg_cap=int(cg.get("mem_limit_bytes", 0))))

# Scaling is against one drive's achieved bandwidth; a replicated run has no
# N = 1 row, so a third argument may name the unreplicated results directory.
one = rows[0]["agg"] if rows and rows[0]["n"] == 1 else None
if one is None and len(sys.argv) > 3:
    r1 = json.load(open(f"{sys.argv[3]}/run-1.json"))
    d1 = [s for s in r1["steps"] if not s["prefill"]]
    one = sum(s["bytes_read"] for s in d1) / (sum(s["ms"] for s in d1) / 1e3)
print(f"Drives throttled to {mbps:.0f} MB/s each; decode steps only; MB = 10^6 bytes.\n")
print("| N | fio MB/s | decode tok/s | MB read/token | achieved MB/s | agg/fio | scaling | s/token | s/floor | s/need-floor | hit rate | lookahead recall |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    floor = r["bytes_tok"] / r["fio"]
    need_floor = r["need_tok"] / r["fio"]
    scaling = r["agg"] / (r["n"] * one) if one else float("nan")
    print(f"| {r['n']} | {r['fio']/1e6:.0f} | {r['tok_s']:.3f} | {r['bytes_tok']/1e6:.0f} | {r['agg']/1e6:.0f} | "
          f"{r['agg']/r['fio']:.3f} | {scaling:.3f} | {r['s_tok']:.2f} | {r['s_tok']/floor:.3f} | "
          f"{r['s_tok']/need_floor:.3f} | {r['hit']:.3f} | {r['recall']:.3f} |")
print("\n| N | budget (spine + cache) | peak RSS (VmHWM) | cgroup peak | cgroup cap |")
print("|---|---|---|---|---|")
for r in rows:
    print(f"| {r['n']} | {r['budget']/1e6:.0f} MB | {r['rss']/1e6:.0f} MB | {r['cg_peak']/1e6:.0f} MB | {r['cg_cap']/1e6:.0f} MB |")
