#!/usr/bin/env python3
"""Tables bench_kernels' roofline run (bench/kernels/roofline.sh).

For each product, the roof is min(FMA peak, intensity x read bandwidth), where
intensity = FLOPs per weight byte = 2 T / bytes per weight (data + scales), the
peak and the bandwidth are the same run's `peak/fma` and `membw/sum/<isa>`.
"bound" says which of the two sets the roof; "of roof" is how close the
product gets to it."""
import json
import re
import sys

BYTES_PER_WEIGHT = {"f32": 4.0, "bf16": 2.0, "int8-row": 1.0, "mxfp4": 0.5 + 1.0 / 32}


def main(path):
    runs = json.load(open(path))["benchmarks"]
    peak = next(r["GFLOP/s"] for r in runs if r["name"].startswith("peak/fma"))
    label = next(r.get("label", "") for r in runs if r["name"].startswith("peak/fma"))
    bw = {}
    for r in runs:
        m = re.match(r"membw/sum/(\w+)", r["name"])
        if m:
            bw[m.group(1)] = r["bytes_per_second"] / 1e9
    print(f"FMA peak (one thread, {label}): {peak:.1f} GFLOP/s; read bandwidth (one thread, 1 GiB sum): " +
          ", ".join(f"{k} {v:.2f} GB/s" for k, v in bw.items()))
    print()
    print("| product | T | isa | GFLOP/s | weight GB/s | per-row speed vs T = 1 | FLOP/byte | roof GFLOP/s | bound | of roof | of peak |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    t1 = {}
    for r in runs:
        m = re.match(r"batched/([\w-]+)/(\d+x\d+)/T(\d+)/(\w+)", r["name"])
        if not m:
            continue
        wtype, shape, T, isa = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        gflops = r["GFLOP/s"]
        gbs = r["bytes_per_second"] / 1e9
        intensity = 2.0 * T / BYTES_PER_WEIGHT[wtype]
        mem_roof = intensity * bw[isa]
        roof = min(peak, mem_roof)
        bound = "memory" if mem_roof < peak else "compute"
        key = (wtype, shape, isa)
        if T == 1:
            t1[key] = gflops
        speedup = gflops / t1[key] if key in t1 else float("nan")
        print(f"| {wtype} {shape} | {T} | {isa} | {gflops:.1f} | {gbs:.2f} | {speedup:.2f} | {intensity:.1f} | "
              f"{roof:.1f} | {bound} | {gflops / roof:.0%} | {gflops / peak:.0%} |")


if __name__ == "__main__":
    main(sys.argv[1])
