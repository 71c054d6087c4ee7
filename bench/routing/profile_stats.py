#!/usr/bin/env python3
"""Routing statistics of deltafin route traces (issue 35), Python standard library only.

    profile_stats.py [--json OUT.json] [--svg OUT.svg] [--title T] TRACE [TRACE ...]

A trace is what `--route-trace FILE` writes (src/experts/route_trace.h): a pass of
more than one position is a prompt's prefill and starts a new answer; the passes of
one position after it are that answer's decoded tokens. Only decode routes count.
Per trace (e.g. one profile of one family) it prints, averaged over the MoE layers:

  coverage   share of the routes served by the hottest x % of a layer's experts
             (x = 10..100, and 32, 61, 65: the K3 fork's points), popularity
             counted over all the trace's decode routes
  locality   share of a token's experts at a layer also used by the previous
             token of the same answer at that layer
  LRU/Belady hit rates of a per-layer cache of k, 3k and E/2 slots over the
             answers' decode routes in order (the cache is kept between answers,
             as an engine keeps it); Belady evicts the expert used farthest in the
             future (never again first), the optimum of any demand-fetch policy
  distinct75 distinct experts a layer touches in an answer's first 75 decoded
             tokens (mean over answers), and that as a share of E

--svg draws every trace's mean coverage curve in one chart (hand-written SVG).
"""
import argparse
import collections
import heapq
import json
import sys

COVERAGE_X = [10, 20, 30, 32, 40, 50, 60, 61, 65, 70, 80, 90, 100]


def read_trace(path):
    """-> (layers, experts, top_k, answers); answers: list of {layer: [set of experts per token]}."""
    with open(path) as f:
        header = f.readline().split()
        if len(header) < 5 or header[0] != "deltafin-route-trace":
            sys.exit(f"{path}: line 1: not a deltafin route trace")
        fields = dict(kv.split("=") for kv in header[2:])
        layers, experts, top_k = int(fields["layers"]), int(fields["experts"]), int(fields["top_k"])
        answers = []
        decode = False
        for n, line in enumerate(f, start=2):
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "P":
                positions = int(parts[1])
                if positions > 1:
                    answers.append({})
                    decode = False
                else:
                    if not answers:
                        answers.append({})
                    decode = True
            elif parts[0] == "R":
                if decode:
                    layer = int(parts[1])
                    answers[-1].setdefault(layer, []).append([int(e) for e in parts[2:]])
            else:
                sys.exit(f"{path}: line {n}: unknown record {parts[0]!r}")
    return layers, experts, top_k, answers


def lru_hits(tokens, slots):
    cache = collections.OrderedDict()  # least recently used first
    hits = total = 0
    for token in tokens:
        for e in token:
            total += 1
            if e in cache:
                hits += 1
                cache.move_to_end(e)
                continue
            if len(cache) >= slots:
                cache.popitem(last=False)
            cache[e] = True
    return hits, total


def belady_hits(tokens, slots):
    seq = [e for token in tokens for e in token]
    never = len(seq) + 1
    next_use = [never] * len(seq)
    last = {}
    for i in range(len(seq) - 1, -1, -1):
        next_use[i] = last.get(seq[i], never)
        last[seq[i]] = i
    cache = {}  # expert -> its next use
    heap = []  # (-next use, expert), stale entries skipped
    hits = 0
    for i, e in enumerate(seq):
        if e in cache:
            hits += 1
        elif len(cache) >= slots:
            while True:
                nu, victim = heapq.heappop(heap)
                if cache.get(victim) == -nu:
                    del cache[victim]
                    break
        cache[e] = next_use[i]
        heapq.heappush(heap, (-next_use[i], e))
    return hits, len(seq)


def stats(path):
    layers, E, k, answers = read_trace(path)
    moe_layers = sorted({l for a in answers for l in a})
    slot_sets = {"k": k, "3k": 3 * k, "E/2": E // 2}
    cov = {x: 0.0 for x in COVERAGE_X}
    curve = [0.0] * 101
    loc_num = loc_den = 0
    hit = {(p, s): [0, 0] for p in ("lru", "belady") for s in slot_sets}
    distinct = []
    tokens_total = 0
    for l in moe_layers:
        seq = [t for a in answers for t in a.get(l, [])]
        tokens_total = max(tokens_total, len(seq))
        counts = [0] * E
        for t in seq:
            for e in t:
                counts[e] += 1
        routes = sum(counts)
        ranked = sorted(counts, reverse=True)
        prefix = [0]
        for c in ranked:
            prefix.append(prefix[-1] + c)
        for x in COVERAGE_X:
            cov[x] += prefix[round(E * x / 100)] / routes / len(moe_layers)
        for x in range(101):
            curve[x] += prefix[round(E * x / 100)] / routes / len(moe_layers)
        for a in answers:
            toks = a.get(l, [])
            for prev, cur in zip(toks, toks[1:]):
                loc_num += len(set(prev) & set(cur))
                loc_den += len(cur)
            if toks:
                distinct.append(len({e for t in toks[:75] for e in t}))
        for name, slots in slot_sets.items():
            for policy, fn in (("lru", lru_hits), ("belady", belady_hits)):
                h, n = fn(seq, slots)
                hit[(policy, name)][0] += h
                hit[(policy, name)][1] += n
    return {
        "trace": path,
        "experts": E,
        "top_k": k,
        "moe_layers": len(moe_layers),
        "answers": len(answers),
        "decode_tokens": tokens_total,
        "coverage": {str(x): cov[x] for x in COVERAGE_X},
        "curve": curve,
        "locality": loc_num / loc_den if loc_den else 0.0,
        "hits": {f"{p}@{s}": h / n if n else 0.0 for (p, s), (h, n) in hit.items()},
        "slots": slot_sets,
        "distinct75": sum(distinct) / len(distinct) if distinct else 0.0,
    }


def print_stats(s):
    print(f"{s['trace']}: E={s['experts']} k={s['top_k']}, {s['moe_layers']} MoE layers, {s['answers']} answers, "
          f"{s['decode_tokens']} decode tokens per layer")
    print("  coverage  " + " ".join(f"{x:>5}%" for x in COVERAGE_X))
    print("            " + " ".join(f"{100 * s['coverage'][str(x)]:>6.1f}" for x in COVERAGE_X))
    print(f"  locality  {100 * s['locality']:.1f} % (random routing: {100 * s['top_k'] / s['experts']:.1f} %)")
    for name, slots in s["slots"].items():
        lru, bel = s["hits"][f"lru@{name}"], s["hits"][f"belady@{name}"]
        print(f"  {name:>3} = {slots:>4} slots/layer: LRU {100 * lru:5.1f} %   Belady {100 * bel:5.1f} %")
    print(f"  distinct experts in the first 75 tokens: {s['distinct75']:.1f} of {s['experts']} "
          f"({100 * s['distinct75'] / s['experts']:.1f} %)")


def svg(all_stats, path, title):
    W, H, L, T, R, B = 640, 440, 60, 40, 200, 50
    pw, ph = W - L - R, H - T - B
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
              "#17becf"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="22" font-size="14">{title}</text>']
    for i in range(0, 101, 10):
        x, y = L + pw * i / 100, T + ph * (1 - i / 100)
        out.append(f'<line x1="{x}" y1="{T}" x2="{x}" y2="{T + ph}" stroke="#ddd"/>')
        out.append(f'<line x1="{L}" y1="{y}" x2="{L + pw}" y2="{y}" stroke="#ddd"/>')
        out.append(f'<text x="{x}" y="{T + ph + 16}" text-anchor="middle">{i}</text>')
        out.append(f'<text x="{L - 6}" y="{y + 4}" text-anchor="end">{i}</text>')
    out.append(f'<text x="{L + pw / 2}" y="{H - 10}" text-anchor="middle">hottest experts of a layer (%)</text>')
    out.append(f'<text x="16" y="{T + ph / 2}" transform="rotate(-90 16 {T + ph / 2})" text-anchor="middle">'
               'decode routes served (%)</text>')
    # The K3 fork's published points.
    for x, y in ((32, 66.5), (61, 88.9), (65, 96.1)):
        cx, cy = L + pw * x / 100, T + ph * (1 - y / 100)
        out.append(f'<circle cx="{cx}" cy="{cy}" r="4" fill="none" stroke="black"/>')
    for i, s in enumerate(all_stats):
        c = colors[i % len(colors)]
        pts = " ".join(f"{L + pw * x / 100:.1f},{T + ph * (1 - s['curve'][x]):.1f}" for x in range(101))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
        label = s.get("label", s["trace"])
        out.append(f'<line x1="{L + pw + 12}" y1="{T + 14 + 18 * i}" x2="{L + pw + 32}" y2="{T + 14 + 18 * i}" '
                   f'stroke="{c}" stroke-width="2"/>')
        out.append(f'<text x="{L + pw + 36}" y="{T + 18 + 18 * i}">{label}</text>')
    n = len(all_stats)
    out.append(f'<circle cx="{L + pw + 22}" cy="{T + 14 + 18 * n}" r="4" fill="none" stroke="black"/>')
    out.append(f'<text x="{L + pw + 36}" y="{T + 18 + 18 * n}">K3 fork traces</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+", help="route traces; LABEL=PATH names a curve in the SVG")
    ap.add_argument("--json", help="write every figure as JSON")
    ap.add_argument("--svg", help="draw the coverage curves")
    ap.add_argument("--title", default="Coverage of decode routes per MoE layer")
    args = ap.parse_args()
    results = []
    for t in args.traces:
        label, _, path = t.rpartition("=") if "=" in t else ("", "", t)
        s = stats(path)
        if label:
            s["label"] = label
        print_stats(s)
        results.append(s)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.svg:
        svg(results, args.svg, args.title)


if __name__ == "__main__":
    main()
