#!/usr/bin/env python3
"""Table for bench/prefill/ab.sh: per alternated pair, streamed TTFT against
its floor = max(I/O bound = unique expert bytes / fio bandwidth, compute bound
= the resident run's prefill time measured right after it); then the median
and range of the ratio.  usage: ab_table.py OUT_DIR REPS"""
import json, re, statistics, sys

out, reps = sys.argv[1], int(sys.argv[2])
fio = json.load(open(f"{out}/fio.json"))
fio_bw = sum(j["read"]["bw_bytes"] for j in fio["jobs"])
print(f"\ndrives: fio {fio_bw / 1e6:.0f} MB/s aggregate\n")
print("| pair | TTFT s | I/O bound s | compute bound s | floor s | bound | TTFT / floor | amplification |")
print("|---|---|---|---|---|---|---|---|")
ratios = []
for r in range(1, reps + 1):
    s = json.load(open(f"{out}/streamed-{r}.json"))
    ttft = s["prefill"]["ttft_ms"] / 1e3
    io_s = s["prefill"]["unique_bytes"] / fio_bw
    comp_s = float(re.search(r"prefill ([0-9.]+) ms", open(f"{out}/resident-{r}.log").read()).group(1)) / 1e3
    floor = max(io_s, comp_s)
    ratios.append(ttft / floor)
    print(f"| {r} | {ttft:.2f} | {io_s:.2f} | {comp_s:.2f} | {floor:.2f} | {'I/O' if io_s >= comp_s else 'compute'} | "
          f"{ttft / floor:.3f} | {s['prefill']['amplification']:.2f} |")
print(f"\nTTFT / floor: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f} over {reps} pairs")
