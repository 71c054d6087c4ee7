#!/usr/bin/env python3
"""Tables of the cache-policy study (bench/cache/study.sh): per family and
profile, the held-out hit rate of every policy at every size with Belady's
optimum beside it, the best policy's gap to Belady, in-sample and pinned-tier
arms, and a winner count; writes OUT/hit-curves.json for
bench/projection/project.py (per profile, the held-out hit rate of the
engine's default policy against the cache's fraction of the bank, from the
K3-shaped traces)."""
import json
import os
import sys

OUT = sys.argv[1]
DEFAULT = "auto"  # the engine's default (experts/cache_policy.h)
PROFILES = ["uniform", "k3-fork", "flat-balanced", "olmoe-like", "glm-like"]
POLICIES = ["lru", "frequency", "cycle-heat", "cycle-reuse"]


def load(family, profile, arm):
    with open(os.path.join(OUT, f"{family}-{profile}-{arm}.json")) as f:
        return json.load(f)


def by_size(d):
    t = {}
    for r in d["rows"]:
        t.setdefault(r["slots"], {})[r["policy"]] = r["hit_rate"] * 100
    return t


wins = {}
regrets = []
curves = {}
for family in ["k3", "qwen3_moe"]:
    for profile in PROFILES:
        held, ins, pin, auto = (load(family, profile, a) for a in ("heldout", "insample", "pinned", "auto"))
        with open(os.path.join(OUT, f"{family}-{profile}-auto.txt")) as f:
            auto_line = f.read().strip()
        s = held["summary"]
        bank = s["moe_layers"] * s["experts"]
        cov90 = sum(l["coverage_90"] for l in s["layers"]) / len(s["layers"]) * 100
        reuse = sum(l["reuse"] for l in s["layers"]) / len(s["layers"]) * 100
        print(f"\n### {family}, {profile}: 90 % of routes from {cov90:.1f} % of experts, "
              f"temporal reuse {reuse:.1f} %, {s['decode_tokens']} test tokens, bank {bank}; {auto_line}\n")
        print("| slots | % of bank | " + " | ".join(POLICIES) + " | Belady | best | best's gap | auto | auto's regret | "
              "in-sample best | pinned ½: cycle-heat / frequency |")
        print("|" + "---|" * (len(POLICIES) + 9))
        h, i, p = by_size(held), by_size(ins), by_size(pin)
        a = {r["slots"]: r["hit_rate"] * 100 for r in auto["rows"] if r["policy"] != "belady"}
        pts = []
        for slots in sorted(h):
            row = h[slots]
            best = max(POLICIES, key=lambda q: (row[q], -POLICIES.index(q)))
            if slots > s["top_k"]:  # sizes above one layer's working set
                wins.setdefault((family, profile), []).append(best)
            ibest = max(i[slots][q] for q in POLICIES)
            pinned = f"{p[slots]['cycle-heat']:.2f} / {p[slots]['frequency']:.2f}" if slots in p else "-"
            cells = " | ".join(f"**{row[q]:.2f}**" if q == best else f"{row[q]:.2f}" for q in POLICIES)
            regrets.append(row[best] - a[slots])
            print(f"| {slots} | {100 * slots / bank:.1f} | {cells} | {row['belady']:.2f} | {best} | "
                  f"{row['belady'] - row[best]:.2f} | {a[slots]:.2f} | {row[best] - a[slots]:.2f} | {ibest:.2f} | {pinned} |")
            pts.append({"fraction_of_bank": slots / bank, "hit_rate": a[slots] / 100})
        if family == "k3":
            curves[profile] = {
                "placeholder": False,
                "note": f"held-out hit rate of --cache-policy auto ({auto_line}) on the K3-shaped benchmark model's "
                        "route traces (7 MoE layers x 896 experts, top-16; bench/cache/study.sh), heat learned on "
                        "other prompts; (1, 1) added: a cache holding the whole bank",
                "points": [{"fraction_of_bank": 0.0, "hit_rate": 0.0}] + pts + [{"fraction_of_bank": 1.0, "hit_rate": 1.0}]}
print("\n### Best policy per size (held out), sizes above one layer's working set\n")
for (family, profile), w in wins.items():
    print(f"- {family} {profile}: " + ", ".join(f"{q} x{w.count(q)}" for q in POLICIES if w.count(q)))
print(f"\nauto's regret (best policy's hit rate minus auto's, held out, every size): max {max(regrets):.2f} points, "
      f"mean {sum(regrets) / len(regrets):.2f}")
with open(os.path.join(OUT, "hit-curves.json"), "w") as f:
    json.dump(curves, f, indent=1)
