#!/usr/bin/env python3
"""Table for bench/prefill/slices.sh: per prompt length and arm, TTFT, GB read,
unique GB needed and read amplification, each repetition and the median.
usage: slices_table.py OUT_DIR "128 512" REPS"""
import json, statistics, sys

out, lengths, reps = sys.argv[1], [int(x) for x in sys.argv[2].split()], int(sys.argv[3])
fio = json.load(open(f"{out}/fio.json"))
fio_bw = sum(j["read"]["bw_bytes"] for j in fio["jobs"])
print()
print(f"drives: fio {fio_bw / 1e6:.0f} MB/s aggregate")
print()
print("| prompt | arm | passes | TTFT s (median) | TTFT s per rep | GB read | unique GB | amplification | TTFT / layer-major |")
print("|---|---|---|---|---|---|---|---|---|")
for P in lengths:
    base = None
    for arm in ("layer-major", "chunk-major", "one-slice"):
        runs = [json.load(open(f"{out}/{arm}-{P}-{r}.json"))["prefill"] for r in range(1, reps + 1)]
        ttft = statistics.median(x["ttft_ms"] / 1e3 for x in runs)
        if base is None:
            base = ttft
        last = runs[-1]
        per_rep = " / ".join("%.2f" % (x["ttft_ms"] / 1e3) for x in runs)
        print(f"| {P} | {arm} | {last['passes']} | {ttft:.2f} | {per_rep} | "
              f"{last['bytes_read'] / 1e9:.2f} | {last['unique_bytes'] / 1e9:.2f} | {last['amplification']:.2f} | {ttft / base:.3f} |")
