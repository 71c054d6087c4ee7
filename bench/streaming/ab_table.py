#!/usr/bin/env python3
"""Table for bench/streaming/lookahead_ab.sh: one row per arm, decode steps only.

Usage: ab_table.py RESULTS_DIR ARM...   (RESULTS_DIR holds fio.json and run-ARM.json)
  s/need-floor  s/token / (bytes of the experts demanded and not in RAM —
                misses + reads in flight — / fio's aggregate bandwidth)
  s/need+pf     the same, also counting experts that were in RAM only because
                this run's lookahead had read them (prefetched hits)
  s/floor       s/token / (all bytes read per token / fio)
"""
import json, sys

out, arms = sys.argv[1], sys.argv[2:]
fio = sum(j["read"]["bw_bytes"] for j in json.load(open(f"{out}/fio.json"))["jobs"])
print(f"fio {fio/1e6:.0f} MB/s aggregate; decode steps only; MB = 10^6 bytes.\n")
print("| --lookahead | s/token | MB read/token | agg/fio | s/floor | s/need-floor | s/need+pf | hits (prefetched) / in flight / misses | prefetches issued / cancelled |")
print("|---|---|---|---|---|---|---|---|---|")
for arm in arms:
    run = json.load(open(f"{out}/run-{arm}.json"))
    dec = [s for s in run["steps"] if not s["prefill"]]
    n, t = len(dec), sum(s["ms"] for s in dec) / 1e3
    eb = run["expert_bytes"]
    tot = lambda k: sum(s[k] for s in dec)
    b = tot("bytes_read")
    need = (tot("misses") + tot("inflight")) * eb
    need_pf = need + tot("prefetch_hits") * eb
    print(f"| {arm} | {t/n:.3f} | {b/n/1e6:.0f} | {b/t/fio:.3f} | {t/(b/fio):.3f} | {t/(need/fio):.3f} | {t/(need_pf/fio):.3f} | "
          f"{tot('hits')} ({tot('prefetch_hits')}) / {tot('inflight')} / {tot('misses')} | {tot('prefetch_issued')} / {tot('prefetch_cancelled')} |")
