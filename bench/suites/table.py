#!/usr/bin/env python3
"""Tables of bench/suites/run.sh from the `deltafin bench --json` files:
medians (with min-max) of the cold measured runs, and the drives' fio figure
from the same session."""
import glob
import json
import os
import sys

out = sys.argv[1]


def fio_mb_s(n):
    path = os.path.join(out, f"fio-{n}.json")
    if not os.path.exists(path):
        return None
    jobs = json.load(open(path))["jobs"]
    return sum(j["read"]["bw_bytes"] for j in jobs) / 1e6


def med(j, key, scale=1.0):
    m = j["summary"]["A"].get(key)
    if not m or m["median"] is None:
        return "-"
    return f"{m['median'] * scale:.3g} ({m['min'] * scale:.3g}-{m['max'] * scale:.3g})"


def row(name, j, fio):
    total = j["summary"]["A"].get("drives_total_mb_s", {}).get("median")
    ratio = f"{total / fio:.3f}" if total and fio else "-"
    return (f"| {name} | {med(j, 'decode_tokens_per_s')} | {med(j, 'ttft_ms', 1e-3)} | "
            f"{med(j, 'bytes_read_per_token', 1e-6)} | {med(j, 'hit_rate')} | "
            f"{med(j, 'drives_total_mb_s')} | {fio:.0f} | {ratio} | {'yes' if j['tokens_equal'] else 'NO'} |")


header = ("| run | decode tokens/s | TTFT s | MB read/token | hit rate | drives MB/s (over the run) "
          "| fio MB/s | drives/fio | tokens equal |\n|---|---|---|---|---|---|---|---|---|")
scaling = sorted(glob.glob(os.path.join(out, "scaling-[0-9].json")))
if scaling:
    print("\n## Drive scaling (cold runs; median and min-max)\n")
    print(header)
    for path in scaling:
        n = int(path[-6])
        print(row(f"{n} drive(s)", json.load(open(path)), fio_mb_s(n)))
over = sorted(glob.glob(os.path.join(out, "oversub-*.json")))
if over:
    print("\n## Oversubscription (cold runs; the expert bank is 5.6 GB)\n")
    print(header)
    fio = fio_mb_s("oversub")
    for path in over:
        print(row(os.path.basename(path)[8:-5] + " cap", json.load(open(path)), fio))
