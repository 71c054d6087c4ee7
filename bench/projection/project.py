#!/usr/bin/env python3
"""Project deltafin's Kimi K3 decode tokens/s and time to first token onto real machines.

Usage:
    bench/projection/project.py [--hardware FILE] [--profiles FILE] [--markdown FILE]
                                [--prompt N] [--no-checks]

    --hardware   machines to project onto (default: bench/projection/hardware.json)
    --profiles   routing profiles, the expert cache's hit-rate curves
                 (default: bench/projection/profiles.json)
    --markdown   where the Markdown tables go (default: stdout only); the same
                 tables are printed either way
    --prompt     prompt length for the TTFT column (default 512)
    --no-checks  skip the hold-out check (the exit status is then 0 or 2 only)

Exit status: 0 when every stated error bound of the hold-out check holds; 1 when
one is exceeded (the table is still printed and written, and the failing rows are
named on stderr); 2 on bad input (a file, a field or an option, named in the
message).

Standard library only. Python 3.9 or later.

The profiles file (--profiles)
------------------------------
A JSON object; each key is a profile name, each value either a list of points or
an object {"points": [...], "placeholder": true|false, "note": "..."}. A point is
{"fraction_of_bank": f, "hit_rate": h}: with an expert cache of f x the expert
bank (all routed experts of the model: 82,432 x 17,547,264 bytes = 1,446.5 GB for
K3), a decoded token finds h of its routed experts in RAM. Rules (each checked,
a violation is an error naming the profile and the point):
  - 0 <= f <= 1 and 0 <= h <= 1, f strictly increasing, h non-decreasing;
  - (0, 0) is implied when the first point has f > 0 (no cache, no hits);
  - between points the curve is linear; beyond the last point it says nothing,
    so a machine whose cache is a larger fraction gets no prediction for that
    profile: its row says "beyond the curve" and stderr names the profile and the
    fraction (end the curve at (1, 1), or at the largest cache you simulated).
Example:
    {"uniform": [{"fraction_of_bank": 0, "hit_rate": 0},
                 {"fraction_of_bank": 1, "hit_rate": 1}],
     "k3-fork": {"placeholder": false, "note": "cache simulator, LRU+freq, run 7",
                 "points": [{"fraction_of_bank": 0.0002, "hit_rate": 0.05}, ...]}}
A profile marked "placeholder": true is printed with "(placeholder)" beside its
name in every table.

The hardware file (--hardware)
------------------------------
{"machines": [MACHINE, ...]}; MACHINE fields (units: GB = 1e9 bytes):
  name, label          identifier and table label (strings; name unique)
  model                "k3" (default), or a bench checkpoint of this rig:
                       "k3-bench", "qwen3-bench", "dsv3-bench"
  ram_gb, os_reserve_gb   RAM and what the OS and other programs keep; the run
                       gets ram_gb - os_reserve_gb (deltafin's available_ram)
  spine                "auto" (deltafin's rule: BF16 if it is at most 75 % of
                       ram_gb, else int8-row), "bf16" or "int8"
  cache_gb             expert cache; null = deltafin's auto rule (70 % of what
                       the spine leaves)
  drives               [{"gbps": read GB/s, "latency_ms": per-read latency}, ...]
  aggregate_cap_gbps   optional: the drives together never exceed this (a host
                       or link limit); null = no cap
  layout               "striped" (default over 2+ drives) or "whole"
  throttle_slice_s     0 for real drives; the bench rig's blkio throttle lets an
                       idle drive catch up within its slice (0.1 s), see below
  lookahead            true: route-lookahead prefetch with the idle-window gate
  prefill_chunk        rows per prefill slice (deltafin's default 128; 0 = one)
  cpu: {core_equivalents, mxfp4_t1_gflops, mxfp4_batched_gflops, bf16_t1_gbps,
        int8_t1_gbps, spine_batched_gflops, memory_gbps, crc_gbps, basis}
                       per-core rates of deltafin's kernels (T = 1 products, the
                       batched plateau), the CPU's usable memory bandwidth, the
                       CRC-32C rate of one thread
  published            optional list of {what, decode_tps, ttft_s, prompt,
                       source, comparable} shown beside the prediction
  ladder_of            optional: name of the machine this one is a rung of (the
                       drive-count ladder prints each rung as % of that machine)
  ladder_published     optional: the published % of that machine for this rung
  basis                where the numbers come from (string)

The model (see bench/results/2026-12-05-projection.md for the derivation)
-------------------------------------------------------------------------
Decode, per MoE layer l (L of them), for one token:
    m      = k (1 - h)                       missed experts (h from the profile)
    R_l    = lat + m B / (eta sum(bw))       striped reads (whole files: the
                                             busiest drive, simulated)
    X_l    = (k F / r1 + m B / crc) / cores  routed-expert compute + CRC (overlaps R_l)
    S_l    = spine_bytes / (L min(cores r_spine, mem))   attention, router, shared
                                             experts: the drives idle (no overlap)
    P_l    = min(S_l, rho (R_l - lat))       lookahead reads in that idle window
    t_l    = S_l + O_l + max(R_l - P_l, X_l) + X_l / k
    t      = sum_l t_l                       (O_l: spine that did not fit, re-read)
Prefill of P tokens (expert-major, layer by layer, slices of c rows):
    U      = E (1 - (1 - k/E)^P)             union of a layer's experts
    reads  = U + (n_slices - 1) U_c max(0, 1 - slots/U)
    IO     = L reads B / (eta sum(bw)),  C = P (L k F / r_b(rows) + f_spine / r_sb) / cores
    TTFT   = max(IO, C) + one expert's worth of the smaller (pipeline fill)
with eta, and the in-situ factors of the compute rates, fitted on this rig's
measurements (CALIBRATION below) and checked against others (CHECKS).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_HARDWARE = os.path.join(HERE, "hardware.json")
DEFAULT_PROFILES = os.path.join(HERE, "profiles.json")
GB = 1e9


class InputError(Exception):
    """Bad input: the message names the file, the field and what was wrong."""


class BeyondCurve(Exception):
    """A cache larger than the profile's last point: the curve does not say what it hits."""


# ---------------------------------------------------------------------------
# Models: what a token needs. K3's spine is summed from its tensor shapes
# (docs/k3-model.md §3) so the 113.5 GB / 58.0 GB of the doc are checked here.
# ---------------------------------------------------------------------------

def k3_spine():
    """K3's spine bytes (bf16, int8-row) and parameters, from k3-model.md §3 and §5.2."""
    d, layers, vocab, i_dense, experts, lat, i_moe, shared = 7168, 93, 163840, 33792, 896, 3584, 3072, 2
    heads, head_dim, r_q, r_kv, nope, rope, v_dim = 96, 128, 1536, 512, 128, 64, 128
    d_kda = heads * head_dim
    mla = set(range(3, 93, 4)) | {92}
    tot = {"bf16": 0, "int8": 0, "params": 0}
    # int8-row quantizes rank-2 BF16 tensors except these (k3-model.md §5.2) and the embedding.
    keep = ("conv1d", "norm", "A_log", "dt_bias", "res_proj", "e_score", "embed")

    def t(rows, cols, name, f32=False):
        n = rows * cols
        tot["params"] += n
        if f32:
            tot["bf16"] += 4 * n
            tot["int8"] += 4 * n
            return
        tot["bf16"] += 2 * n
        quantized = rows > 1 and cols > 1 and not any(x in name for x in keep)
        tot["int8"] += n + 2 * rows if quantized else 2 * n  # int8 values + an f16 scale per row

    t(vocab, d, "embed")
    t(vocab, d, "lm_head")
    for name in ("norm", "output_attn_res_norm", "res_proj"):
        t(1, d, name)
    for i in range(layers):
        for name in ("norm", "norm", "norm", "norm", "res_proj", "res_proj"):
            t(1, d, name)
        if i in mla:
            t(r_q, d, "q_a"), t(1, r_q, "norm"), t(heads * (nope + rope), r_q, "q_b")
            t(r_kv + rope, d, "kv_a"), t(1, r_kv, "norm"), t(heads * (nope + v_dim), r_kv, "kv_b")
            t(heads * v_dim, d, "g"), t(d, heads * v_dim, "o")
        else:
            t(1, head_dim, "A_log", True), t(1, d_kda, "dt_bias", True), t(3 * d_kda, 4, "conv1d", True)
            t(1, head_dim, "o_norm", True)
            for _ in range(4):
                t(d_kda, d, "qkvg")
            t(head_dim, d, "f_a"), t(d_kda, head_dim, "f_b"), t(heads, d, "b"), t(d, d_kda, "o")
        if i == 0:
            t(i_dense, d, "gate"), t(i_dense, d, "up"), t(d, i_dense, "down")
        else:
            t(experts, d, "router"), t(1, experts, "e_score", True), t(lat, d, "latent_down")
            t(1, lat, "norm"), t(d, lat, "latent_up")
            t(shared * i_moe, d, "shared_gate"), t(shared * i_moe, d, "shared_up"), t(d, shared * i_moe, "shared_down")
    tot["embed_bf16"] = vocab * d * 2
    tot["embed_params"] = vocab * d
    return tot


def make_models():
    s = k3_spine()
    # A decoded row streams every spine weight but the embedding (one row of it).
    k3 = {
        "name": "k3", "label": "Kimi K3", "moe_layers": 92, "experts": 896, "top_k": 16,
        "record_bytes": 17_547_264, "expert_flop": 2 * 3 * 3584 * 3072, "expert_type": "mxfp4",
        "spine_bytes": {"bf16": s["bf16"], "int8": s["int8"]},
        "spine_stream_bytes": {"bf16": s["bf16"] - s["embed_bf16"], "int8": s["int8"] - s["embed_bf16"]},
        "spine_flop_per_row": 2 * (s["params"] - s["embed_params"]),
        "spine_params": s["params"],
        # k3-model.md §11: PILOT recall 50-70 % per layer, collapsing at and after MLA layers.
        "lookahead_recall": 0.5,
        "state_bytes": 0.5 * GB,  # KDA state ~453 MiB + the MLA cache of a short context
        "int8_spine": True,
    }
    bench_common = {"state_bytes": 0.02 * GB, "int8_spine": False}
    k3_bench = dict(bench_common, **{
        # make-model --preset bench: K3's real experts, 5 MoE layers x 64 (k3-model.md §14).
        "name": "k3-bench", "label": "K3 bench checkpoint", "moe_layers": 5, "experts": 64, "top_k": 16,
        "record_bytes": 17_547_264, "expert_flop": 2 * 3 * 3584 * 3072, "expert_type": "mxfp4",
        "spine_bytes": {"bf16": 144.6e6}, "spine_stream_bytes": {"bf16": 143.6e6},
        "spine_flop_per_row": 2 * 72e6, "lookahead_recall": 0.614})
    qwen3_bench = dict(bench_common, **{
        # Qwen3-235B-A22B's expert (BF16), 4 MoE layers x 32, top-8 (2026-12-02-streaming-qwen3_moe.md).
        "name": "qwen3-bench", "label": "Qwen3-MoE bench checkpoint", "moe_layers": 4, "experts": 32, "top_k": 8,
        "record_bytes": 37_748_736, "expert_flop": 2 * 3 * 4096 * 1536, "expert_type": "bf16",
        "spine_bytes": {"bf16": 585e6}, "spine_stream_bytes": {"bf16": 585e6},
        "spine_flop_per_row": 585e6, "lookahead_recall": 0.0})
    dsv3_bench = dict(bench_common, **{
        # DeepSeek V3's FP8 expert, 3 MoE layers x 16, top-8 (2026-12-04-streaming-deepseek_v3.md).
        "name": "dsv3-bench", "label": "DeepSeek-V3 bench checkpoint", "moe_layers": 3, "experts": 16, "top_k": 8,
        "record_bytes": 44_050_944, "expert_flop": 2 * 3 * 7168 * 2048, "expert_type": "fp8",
        "spine_bytes": {"bf16": 304e6}, "spine_stream_bytes": {"bf16": 304e6},
        "spine_flop_per_row": 2 * 300e6, "lookahead_recall": 0.0})
    return {m["name"]: m for m in (k3, k3_bench, qwen3_bench, dsv3_bench)}


MODELS = make_models()


def bank_bytes(model):
    return model["moe_layers"] * model["experts"] * model["record_bytes"]


# ---------------------------------------------------------------------------
# Calibration: the parameters taken from this rig's measurements. Each says
# where it came from; CHECKS below holds the measurements it is checked on.
# ---------------------------------------------------------------------------

CALIBRATION = {
    # Achieved / fio of the striped K3 decode on one drive (2026-11-30-streaming/table.md, N = 1).
    "drive_efficiency": 0.994,
    # End-to-end / kernel rate of the T = 1 products: 2 threads decoding the bench checkpoint
    # resident on Zen 5 (19.89 tokens/s, median of 5 rounds, 2026-12-03-expert-groups/llama-cpp)
    # against bench_kernels' one-thread rates there (MXFP4 T = 1 72.2 GFLOP/s). Fitted below.
    "insitu_t1": None,
    # The same for batched products: prompt 128 on Zen 5 (35.30 tokens/s, same session). Fitted below.
    "insitu_batched": None,
}

# The rig's CPUs (bench_kernels, one thread) and what they ran.
XEON_RIG = {  # 2 vCPU Xeon of the drive runs (2026-11-29-kernels.md, run B)
    "core_equivalents": 2, "mxfp4_t1_gflops": 33.3, "mxfp4_batched_gflops": 75.8, "bf16_t1_gbps": 15.5,
    "int8_t1_gbps": 14.6, "spine_batched_gflops": 60.0, "memory_gbps": 25.0, "crc_gbps": 15.1,
    "basis": "2026-11-29-kernels.md run B (AVX-512): MXFP4 8.8-8.9 GB/s = 33 GFLOP/s at T = 1, "
             "batched plateau 75.8 (T = 16), BF16 15.5 GB/s, int8-row 14.6; CRC-32C 15.14 GB/s (2026-11-29-crc32c.md)"}
ZEN5 = {  # 2026-12-03-expert-groups/README.md
    "core_equivalents": 2, "mxfp4_t1_gflops": 72.2, "mxfp4_batched_gflops": 106.3, "bf16_t1_gbps": 26.7,
    "int8_t1_gbps": 26.7, "spine_batched_gflops": 106.3, "memory_gbps": 55.0, "crc_gbps": 15.1,
    "basis": "2026-12-03-expert-groups: FMA 215.7, MXFP4 T = 1 72.2, T = 64 106.3 GFLOP/s; "
             "read 26.7 GB/s one thread, 55 two"}
ZEN4 = {  # 2026-12-03-kernels-roofline.md (after, abbc423)
    "core_equivalents": 2, "mxfp4_t1_gflops": 37.8, "mxfp4_batched_gflops": 81.4, "bf16_t1_gbps": 14.9,
    "int8_t1_gbps": 14.3, "spine_batched_gflops": 69.1, "memory_gbps": 42.0, "crc_gbps": 15.1,
    "basis": "2026-12-03-kernels-roofline (after): MXFP4 T = 1 37.8, T = 64 81.4 GFLOP/s, BF16 T = 1 14.9, "
             "read 21.1 GB/s one thread"}


def rig_machine(model, n, fio_mbps, cap_mb, cache_gb, layout="striped", lookahead=True, chunk=128, cpu=XEON_RIG):
    """One configuration of the bench rig: n loop drives sharing fio_mbps (the session's fio)."""
    per = fio_mbps / n / 1000.0
    return {
        "name": f"rig-{model}-{n}x{fio_mbps / n:.0f}", "label": f"rig {n} x {fio_mbps / n:.0f} MB/s",
        "model": model, "ram_gb": cap_mb / 1000.0, "os_reserve_gb": 0.0, "spine": "bf16", "cache_gb": cache_gb,
        "drives": [{"gbps": per, "latency_ms": 0.0} for _ in range(n)], "aggregate_cap_gbps": None,
        "layout": layout if n > 1 else "striped", "throttle_slice_s": 0.1, "lookahead": lookahead,
        "prefill_chunk": chunk, "cpu": cpu}


# ---------------------------------------------------------------------------
# Memory plan: deltafin's own rules (store/setup.cpp choose_spine,
# experts/memory_plan.cpp plan_memory).
# ---------------------------------------------------------------------------

def plan_memory(model, mc):
    ram = mc["ram_gb"] * GB
    avail = ram - mc.get("os_reserve_gb", 0.0) * GB
    spine_mode = mc.get("spine", "auto")
    if not model.get("int8_spine"):
        fmt = "bf16"
    elif spine_mode == "auto":
        fmt = "bf16" if model["spine_bytes"]["bf16"] <= 0.75 * ram else "int8"
    else:
        fmt = spine_mode
    spine = model["spine_bytes"][fmt]
    slot = math.ceil(model["record_bytes"] / 4096) * 4096
    working = 2 * model["top_k"] if mc.get("lookahead") and model["lookahead_recall"] > 0 else model["top_k"]
    if mc.get("cache_gb") is None:
        cache = max(0.0, avail - spine) * 0.7
    else:
        cache = mc["cache_gb"] * GB
    bank_slots = model["moe_layers"] * model["experts"]
    slots = max(working, min(bank_slots, int(cache // slot)))
    # What does not fit: the spine, the cache's slots and the session state against what the
    # run may use. deltafin's setup says "runs will page"; the model assumes the resident part
    # stays pinned and the rest is read from the drives once per pass (an LRU page cache over
    # a cyclic scan larger than itself would miss everything, so this is the good case).
    need = spine + slots * slot + model["state_bytes"]
    overflow = max(0.0, need - avail)
    return {"spine_format": fmt, "spine_bytes": spine, "slots": slots, "slot_bytes": slot,
            "cache_bytes": slots * model["record_bytes"], "working_slots": working,
            "fraction": slots * model["record_bytes"] / bank_bytes(model), "overflow_bytes": min(overflow, spine)}


# ---------------------------------------------------------------------------
# Profiles
# ---------------------------------------------------------------------------

def load_profiles(path):
    try:
        with open(path) as f:
            raw = json.load(f)
    except OSError as e:
        raise InputError(f"--profiles {path}: cannot read ({e.strerror})")
    except json.JSONDecodeError as e:
        raise InputError(f"--profiles {path}: not JSON ({e})")
    if not isinstance(raw, dict) or not raw:
        raise InputError(f"--profiles {path}: expected an object of profile name -> points, got {type(raw).__name__}")
    out = {}
    for name, v in raw.items():
        where = f"--profiles {path}: profile '{name}'"
        placeholder, note = False, ""
        if isinstance(v, dict):
            unknown = set(v) - {"points", "placeholder", "note"}
            if unknown:
                raise InputError(f"{where}: unknown field(s) {sorted(unknown)} (expected points, placeholder, note)")
            if "points" not in v:
                raise InputError(f"{where}: no 'points'")
            placeholder = v.get("placeholder", False)
            if not isinstance(placeholder, bool):
                raise InputError(f"{where}: 'placeholder' must be true or false, got {placeholder!r}")
            note = v.get("note", "")
            if not isinstance(note, str):
                raise InputError(f"{where}: 'note' must be a string")
            v = v["points"]
        if not isinstance(v, list) or not v:
            raise InputError(f"{where}: expected a non-empty list of {{fraction_of_bank, hit_rate}} points")
        pts = []
        for i, p in enumerate(v):
            pw = f"{where}, point {i}"
            if not isinstance(p, dict) or set(p) != {"fraction_of_bank", "hit_rate"}:
                raise InputError(f"{pw}: expected exactly {{\"fraction_of_bank\": f, \"hit_rate\": h}}, got {p!r}")
            f, h = p["fraction_of_bank"], p["hit_rate"]
            for key, val in (("fraction_of_bank", f), ("hit_rate", h)):
                number = not isinstance(val, bool) and isinstance(val, (int, float)) and math.isfinite(val)
                if not number or not 0 <= val <= 1:
                    raise InputError(f"{pw}: {key} must be a number in [0, 1], got {val!r}")
            if f == 0 and h != 0:
                raise InputError(f"{pw}: a cache of nothing cannot hit (fraction_of_bank 0, hit_rate {h})")
            if pts and f <= pts[-1][0]:
                raise InputError(f"{pw}: fraction_of_bank {f} is not above the previous point's {pts[-1][0]}")
            if pts and h < pts[-1][1]:
                raise InputError(f"{pw}: hit_rate {h} is below the previous point's {pts[-1][1]} "
                                 "(a larger cache cannot hit less)")
            pts.append((float(f), float(h)))
        if pts[0][0] > 0:
            pts.insert(0, (0.0, 0.0))
        out[name] = {"points": pts, "placeholder": placeholder, "note": note, "source": path}
    return out


def hit_rate(profile, name, fraction):
    pts = profile["points"]
    if fraction > pts[-1][0] + 1e-12:
        raise BeyondCurve(f"--profiles {profile['source']}: profile '{name}' ends at fraction_of_bank "
                          f"{pts[-1][0]}, but this machine's cache is {fraction:.4f} of the bank")
    for (f0, h0), (f1, h1) in zip(pts, pts[1:]):
        if fraction <= f1:
            return h0 + (h1 - h0) * (fraction - f0) / (f1 - f0)
    return pts[-1][1]


# ---------------------------------------------------------------------------
# Hardware
# ---------------------------------------------------------------------------

CPU_FIELDS = ("core_equivalents", "mxfp4_t1_gflops", "mxfp4_batched_gflops", "bf16_t1_gbps", "int8_t1_gbps",
              "spine_batched_gflops", "memory_gbps", "crc_gbps")
MACHINE_FIELDS = {"name", "label", "model", "ram_gb", "os_reserve_gb", "spine", "cache_gb", "drives",
                  "aggregate_cap_gbps", "layout", "throttle_slice_s", "lookahead", "prefill_chunk", "cpu",
                  "published", "ladder_of", "ladder_published", "basis"}


def positive(where, key, v, allow_zero=False):
    number = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    ok = number and (v >= 0 if allow_zero else v > 0)
    if not ok:
        raise InputError(f"{where}: '{key}' must be a {'non-negative' if allow_zero else 'positive'} number, got {v!r}")
    return float(v)


def load_hardware(path):
    try:
        with open(path) as f:
            raw = json.load(f)
    except OSError as e:
        raise InputError(f"--hardware {path}: cannot read ({e.strerror})")
    except json.JSONDecodeError as e:
        raise InputError(f"--hardware {path}: not JSON ({e})")
    if not isinstance(raw, dict) or not isinstance(raw.get("machines"), list) or not raw["machines"]:
        raise InputError(f"--hardware {path}: expected {{\"machines\": [...]}} with at least one machine")
    names = set()
    out = []
    for i, m in enumerate(raw["machines"]):
        where = f"--hardware {path}: machine {i}"
        if not isinstance(m, dict):
            raise InputError(f"{where}: expected an object")
        if "name" in m:
            where = f"--hardware {path}: machine '{m['name']}'"
        unknown = set(m) - MACHINE_FIELDS
        if unknown:
            raise InputError(f"{where}: unknown field(s) {sorted(unknown)}")
        for key in ("name", "label", "ram_gb", "drives", "cpu"):
            if key not in m:
                raise InputError(f"{where}: '{key}' is required")
        if not isinstance(m["name"], str) or not m["name"] or m["name"] in names:
            raise InputError(f"{where}: 'name' must be a unique non-empty string")
        names.add(m["name"])
        mc = dict(m)
        mc.setdefault("model", "k3")
        if mc["model"] not in MODELS:
            raise InputError(f"{where}: 'model' {mc['model']!r} is not one of {sorted(MODELS)}")
        positive(where, "ram_gb", m["ram_gb"])
        mc["os_reserve_gb"] = positive(where, "os_reserve_gb", m.get("os_reserve_gb", 0.0), allow_zero=True)
        if mc.setdefault("spine", "auto") not in ("auto", "bf16", "int8"):
            raise InputError(f"{where}: 'spine' must be auto, bf16 or int8, got {mc['spine']!r}")
        if mc.get("cache_gb") is not None:
            positive(where, "cache_gb", mc["cache_gb"], allow_zero=True)
        mc.setdefault("cache_gb", None)
        if not isinstance(m["drives"], list) or not m["drives"]:
            raise InputError(f"{where}: 'drives' must be a non-empty list")
        for j, dr in enumerate(m["drives"]):
            dw = f"{where}, drive {j}"
            if not isinstance(dr, dict) or set(dr) - {"gbps", "latency_ms", "note"} or "gbps" not in dr:
                raise InputError(f"{dw}: expected {{\"gbps\": read GB/s, \"latency_ms\": ms}}, got {dr!r}")
            positive(dw, "gbps", dr["gbps"])
            positive(dw, "latency_ms", dr.get("latency_ms", 0.0), allow_zero=True)
        if m.get("aggregate_cap_gbps") is not None:
            positive(where, "aggregate_cap_gbps", m["aggregate_cap_gbps"])
        mc.setdefault("aggregate_cap_gbps", None)
        if mc.setdefault("layout", "striped") not in ("striped", "whole"):
            raise InputError(f"{where}: 'layout' must be striped or whole, got {mc['layout']!r}")
        mc["throttle_slice_s"] = positive(where, "throttle_slice_s", m.get("throttle_slice_s", 0.0), allow_zero=True)
        if not isinstance(mc.setdefault("lookahead", True), bool):
            raise InputError(f"{where}: 'lookahead' must be true or false")
        chunk = mc.setdefault("prefill_chunk", 128)
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 0:
            raise InputError(f"{where}: 'prefill_chunk' must be a whole number >= 0, got {chunk!r}")
        cpu = m["cpu"]
        if not isinstance(cpu, dict):
            raise InputError(f"{where}: 'cpu' must be an object")
        unknown = set(cpu) - set(CPU_FIELDS) - {"basis"}
        if unknown:
            raise InputError(f"{where}: cpu: unknown field(s) {sorted(unknown)}")
        for key in CPU_FIELDS:
            if key not in cpu:
                raise InputError(f"{where}: cpu: '{key}' is required")
            positive(f"{where}: cpu", key, cpu[key])
        for p in m.get("published", []):
            if not isinstance(p, dict) or "what" not in p or "source" not in p:
                raise InputError(f"{where}: each 'published' entry needs 'what' and 'source'")
        out.append(mc)
    for mc in out:
        if mc.get("ladder_of") and mc["ladder_of"] not in names:
            raise InputError(f"--hardware {path}: machine '{mc['name']}': ladder_of names no machine: "
                             f"{mc['ladder_of']!r}")
    return out


def drive_rates(mc, eta):
    """Per-drive effective read rates (bytes/s): measured rate x efficiency, scaled under the cap."""
    rates = [d["gbps"] * GB * eta for d in mc["drives"]]
    cap = mc.get("aggregate_cap_gbps")
    if cap is not None and sum(rates) > cap * GB * eta:
        scale = cap * GB * eta / sum(rates)
        rates = [r * scale for r in rates]
    return rates


# ---------------------------------------------------------------------------
# Compute rates (bytes or FLOP per second for the whole CPU)
# ---------------------------------------------------------------------------

def batched_rate(cpu, rows):
    """Per-core GFLOP/s of a batched MXFP4 product over `rows` x rows: the decode of the 4-bit
    codes is paid once per weight and the FMA once per (weight, row), between the T = 1 rate and
    the batched plateau. (Against Zen 4's measured curve this is 4-14 % low at T = 2-8.)"""
    t1, top = cpu["mxfp4_t1_gflops"], cpu["mxfp4_batched_gflops"]
    rows = max(1.0, rows)
    return 1.0 / (1.0 / top + (1.0 / t1 - 1.0 / top) / rows)


def expert_t1_flops(model, cpu):
    """FLOP/s of one core on a T = 1 product of this model's expert type."""
    if model["expert_type"] == "mxfp4":
        return cpu["mxfp4_t1_gflops"] * GB
    if model["expert_type"] == "bf16":
        return cpu["bf16_t1_gbps"] * GB  # 2 bytes per weight, 2 FLOP per weight
    # FP8 block: 1 byte per weight; measured 0.92x BF16's weight GB/s (2026-12-04-kernels-fp8-int4.md)
    return cpu["bf16_t1_gbps"] * 0.92 * 2 * GB


def spine_stream_rate(cpu, fmt, insitu):
    per_core = cpu["int8_t1_gbps"] if fmt == "int8" else cpu["bf16_t1_gbps"]
    return min(cpu["core_equivalents"] * per_core * insitu, cpu["memory_gbps"]) * GB


# ---------------------------------------------------------------------------
# Decode
# ---------------------------------------------------------------------------

def whole_file_placement(n_experts, weights):
    """Expert -> drive for one layer, each drive's count in proportion to its bandwidth, as setup
    places whole files (design.md §3); with equal drives, expert e goes to drive e mod N's share."""
    total = sum(weights)
    bounds, acc = [], 0.0
    for w in weights:
        acc += w / total
        bounds.append(acc)
    out = []
    for e in range(n_experts):
        at = (e + 0.5) / n_experts
        out.append(next(d for d, b in enumerate(bounds) if at <= b + 1e-12))
    return out


def decode(model, mc, hit, cal, compute_scale=1.0, trials=None, seed=35):
    """Seconds per decoded token and its parts. A Monte Carlo over tokens: per MoE layer the
    misses, their drives (whole files) and the drives' idle time (the rig's throttle slice)."""
    plan = plan_memory(model, mc)
    cpu = mc["cpu"]
    L, k, E, B = model["moe_layers"], model["top_k"], model["experts"], model["record_bytes"]
    rates = drive_rates(mc, cal["drive_efficiency"])
    agg = sum(rates)
    lat = max(d.get("latency_ms", 0.0) for d in mc["drives"]) / 1000.0
    cores = cpu["core_equivalents"]
    insitu = cal["insitu_t1"] * compute_scale
    x_full = k * model["expert_flop"] / (cores * expert_t1_flops(model, cpu) * insitu)  # one layer's routed experts
    crc_per_byte = 1.0 / (cpu["crc_gbps"] * GB * cores * compute_scale)
    s_token = model["spine_stream_bytes"][plan["spine_format"]] / spine_stream_rate(cpu, plan["spine_format"], insitu)
    s_layer = s_token / L
    overflow_layer = plan["overflow_bytes"] / L / agg
    rho = model["lookahead_recall"] if mc.get("lookahead") else 0.0
    slice_s = mc.get("throttle_slice_s", 0.0)
    whole = mc.get("layout") == "whole" and len(rates) > 1
    placement = whole_file_placement(E, rates) if whole else None
    shares = [r / agg for r in rates]
    trials = trials or (60 if L > 20 else 600)
    rng = random.Random(seed)
    n = len(rates)
    total = io_total = 0.0
    for _ in range(trials):
        budget = [0.0] * n  # bytes a throttled drive may read at once after idling (<= slice x rate)
        t = 0.0
        for _layer in range(L):
            # The serial part: spine compute (the drives idle, or read the spine that did not fit).
            gap = s_layer
            t += overflow_layer + gap
            # This token's misses and where they are.
            loads = [0.0] * n
            if whole:
                for e in rng.sample(range(E), k):
                    if rng.random() >= hit:
                        loads[placement[e]] += B
            else:
                misses = sum(1 for _ in range(k) if rng.random() >= hit)
                loads = [misses * B * s for s in shares]
            missed = sum(loads)
            # Lookahead reads predictions in the idle window (the gate keeps them within it).
            pre = [min(gap * r, rho * ld) for r, ld in zip(rates, loads)]
            for d in range(n):
                idle = gap - pre[d] / rates[d]
                budget[d] = min(budget[d] + idle * rates[d], slice_s * rates[d])
            times = []
            for d in range(n):
                rem = loads[d] - pre[d]
                burst = min(budget[d], rem)
                budget[d] -= burst
                times.append((rem - burst) / rates[d])
            io = (lat + max(times)) if missed > 0 else 0.0
            x = x_full + missed * crc_per_byte
            tail = x_full / k if missed > 0 else 0.0
            layer = max(io + tail, x)
            for d in range(n):
                budget[d] = min(budget[d] + (layer - times[d]) * rates[d], slice_s * rates[d])
            t += layer
            io_total += io
        total += t
    t = total / trials
    return {"s_per_token": t, "tokens_per_s": 1.0 / t, "hit": hit, "plan": plan,
            "read_bytes": L * k * (1 - hit) * B + plan["overflow_bytes"], "overflow_s": L * overflow_layer,
            "io_s": io_total / trials, "spine_s": s_token, "expert_s": L * x_full,
            "bound": "I/O" if io_total / trials > L * x_full else "compute"}


# ---------------------------------------------------------------------------
# Prefill
# ---------------------------------------------------------------------------

def union(E, k, rows):
    return E * (1.0 - (1.0 - k / E) ** rows)


def prefill(model, mc, prompt, cal, compute_s=None, compute_scale=1.0):
    """Time to first token of a `prompt`-token prompt, expert-major, layer by layer."""
    plan = plan_memory(model, mc)
    cpu = mc["cpu"]
    L, k, E, B = model["moe_layers"], model["top_k"], model["experts"], model["record_bytes"]
    agg = sum(drive_rates(mc, cal["drive_efficiency"]))
    chunk = mc.get("prefill_chunk", 128) or prompt
    rows = min(prompt, chunk)
    slices = math.ceil(prompt / rows)
    u, u_slice = union(E, k, prompt), union(E, k, rows)
    reads = u + (slices - 1) * u_slice * max(0.0, 1.0 - plan["slots"] / u)
    io = (L * reads * B + plan["overflow_bytes"]) / agg
    if compute_s is None:
        cores = cpu["core_equivalents"]
        eff = cal["insitu_batched"] * compute_scale
        per_expert_rows = rows * k / u_slice
        routed = prompt * L * k * model["expert_flop"] / (cores * batched_rate(cpu, per_expert_rows) * GB * eff)
        spine = prompt * model["spine_flop_per_row"] / (cores * cpu["spine_batched_gflops"] * GB * eff)
        compute_s = routed + spine
    fill = min(io / (L * reads), compute_s / (L * u))  # one expert's read or compute is not overlapped
    lat = max(d.get("latency_ms", 0.0) for d in mc["drives"]) / 1000.0
    ttft = max(io, compute_s) + fill + lat
    return {"ttft_s": ttft, "io_s": io, "compute_s": compute_s, "amplification": reads / u, "union": u,
            "bound": "I/O" if io > compute_s else "compute", "plan": plan}


# ---------------------------------------------------------------------------
# Calibration fits and the hold-out check
# ---------------------------------------------------------------------------

BENCH_DECODE_FLOP = 5 * 16 * 2 * 3 * 3584 * 3072  # routed FLOP of a bench-checkpoint token


def resident_decode_s(cpu, insitu):
    """A bench-checkpoint token with every weight in RAM: the routed T = 1 products and the spine."""
    model = MODELS["k3-bench"]
    cores = cpu["core_equivalents"]
    x = BENCH_DECODE_FLOP / (cores * cpu["mxfp4_t1_gflops"] * GB * insitu)
    s = model["spine_stream_bytes"]["bf16"] / spine_stream_rate(cpu, "bf16", insitu)
    return x + s


def resident_prefill_s(cpu, insitu, prompt):
    model = MODELS["k3-bench"]
    mc = {"cpu": cpu, "drives": [{"gbps": 1.0}], "ram_gb": 24, "prefill_chunk": 128, "cache_gb": 1.0}
    cal = {"insitu_batched": insitu, "drive_efficiency": 1.0}
    return prefill(model, mc, prompt, cal)["compute_s"]


def fit_calibration():
    cal = dict(CALIBRATION)
    # insitu_t1 solves resident_decode_s(ZEN5, e) = 1 / 19.89 (both terms scale as 1/e).
    cal["insitu_t1"] = resident_decode_s(ZEN5, 1.0) * 19.89
    cal["insitu_batched"] = resident_prefill_s(ZEN5, 1.0, 128) / (128 / 35.30)
    return cal


def checks(cal):
    """Every measurement the model is compared with: (group, label, role, measured, predicted, unit, source, note).
    role: 'fit' (a parameter was taken from it), 'hold-out' (in the bound), 'shown' (outside the model's
    domain or an older engine; printed with the reason, not in the bound)."""
    rows = []

    def add(group, label, role, measured, predicted, unit, source, note=""):
        rows.append({"group": group, "label": label, "role": role, "measured": measured, "predicted": predicted,
                     "unit": unit, "source": source, "note": note})

    # A. Decode over throttled drives, 1.8 GB cap, --cache-gb 1.0; the measured hit rate is the profile input.
    k3s = [(1, 251, 0.154, 4.77), (2, 501, 0.164, 2.35), (3, 751, 0.161, 1.58), (4, 1003, 0.157, 1.19)]
    for n, fio, h, s in k3s:
        mc = rig_machine("k3-bench", n, fio, 1887, 1.0)
        add("A decode", f"K3 bench striped, {n} x 250 MB/s", "fit" if n == 1 else "hold-out", s,
            decode(MODELS["k3-bench"], mc, h, cal)["s_per_token"], "s/token", "2026-11-30-streaming/table.md")
    k3w = [(2, 501, 0.159, 2.71), (3, 752, 0.150, 2.10), (4, 1002, 0.154, 1.65)]
    for n, fio, h, s in k3w:
        mc = rig_machine("k3-bench", n, fio, 1887, 1.0, layout="whole")
        add("A decode", f"K3 bench whole files, {n} x 250 MB/s", "hold-out", s,
            decode(MODELS["k3-bench"], mc, h, cal)["s_per_token"], "s/token", "2026-11-30-streaming-whole/table.md",
            "per-layer barrier on the busiest drive, simulated")
    mc = rig_machine("k3-bench", 4, 1003, 1887, 1.0, lookahead=False)
    add("A decode", "K3 bench striped, 4 drives, lookahead off", "hold-out", 1.094,
        decode(MODELS["k3-bench"], mc, 124 / 560, cal)["s_per_token"], "s/token",
        "2026-11-30-lookahead-ab-N4-striped-gated/table.md", "hits 124 of 560")
    for n, fio, s in [(1, 251, 3.73), (2, 501, 1.86), (3, 751, 1.24), (4, 1003, 0.93)]:
        mc = rig_machine("qwen3-bench", n, fio, 1887, 1.0, lookahead=False)
        add("A decode", f"Qwen3-MoE bench, {n} x 250 MB/s", "hold-out", s,
            decode(MODELS["qwen3-bench"], mc, 0.228, cal)["s_per_token"], "s/token",
            "2026-12-02-streaming-qwen3_moe.md")
    for n, fio, s in [(1, 251, 2.61), (2, 502, 1.30), (3, 752, 0.87), (4, 1004, 0.64)]:
        mc = rig_machine("dsv3-bench", n, fio, 1887, 1.0, lookahead=False)
        add("A decode", f"DeepSeek-V3 bench, {n} x 250 MB/s", "hold-out", s,
            decode(MODELS["dsv3-bench"], mc, 0.381, cal)["s_per_token"], "s/token",
            "2026-12-04-streaming-deepseek_v3.md")

    # The suites ran before the idle-window gate: their lookahead read wrong predictions, so the bytes
    # read per token (1.31-1.45 GB) exceed the misses; the model is given those bytes as demand reads,
    # which over-counts (some of them landed in idle windows).
    suites = [(1, 251, 1310, 0.188), (2, 501, 1380, 0.335), (3, 752, 1420, 0.487), (4, 1002, 1450, 0.584)]
    for n, fio, mb, tps in suites:
        mc = rig_machine("k3-bench", n, fio, 1887, 1.0, layout="whole")
        h = 1.0 - mb * 1e6 / (5 * 16 * MODELS["k3-bench"]["record_bytes"])
        add("A decode", f"K3 bench whole files, cold suite, {n} x 250 MB/s", "shown", tps,
            decode(MODELS["k3-bench"], mc, h, cal)["tokens_per_s"], "tokens/s", "2026-11-30-suites/table.md",
            "engine of 16545e0, before the idle-window gate: its wrong prefetches are counted as demand reads")
    oversub = [(1200, 0.6, 1430, 0.324), (1800, 1.0, 1370, 0.33), (2600, 1.5, 1190, 0.384), (4000, 2.5, 910, 0.494)]
    for cap, cache, mb, tps in oversub:
        mc = rig_machine("k3-bench", 2, 501, cap, cache, layout="whole")
        h = 1.0 - mb * 1e6 / (5 * 16 * MODELS["k3-bench"]["record_bytes"])
        add("A decode", f"K3 bench whole files, 2 drives, {cap} MB cap, {cache} GB cache", "shown", tps,
            decode(MODELS["k3-bench"], mc, h, cal)["tokens_per_s"], "tokens/s", "2026-11-30-suites/table.md",
            "as the row above")

    # D. The uniform profile against the hit rates measured with random routers (the profiles are an
    # input; these rows say how far 'hit = fraction of the bank' is from deltafin's cache on such a model).
    for model, mc, measured, src in [
            ("k3-bench", rig_machine("k3-bench", 4, 1003, 1887, 1.0), 0.157,
             "2026-11-30-streaming/table.md (0.154-0.164 over N)"),
            ("k3-bench", rig_machine("k3-bench", 4, 1003, 1887, 1.0, lookahead=False), 124 / 560,
             "2026-11-30-lookahead-ab-N4-striped-gated/table.md, lookahead off"),
            ("qwen3-bench", rig_machine("qwen3-bench", 4, 1003, 1887, 1.0, lookahead=False), 0.228,
             "2026-12-02-streaming-qwen3_moe.md"),
            ("dsv3-bench", rig_machine("dsv3-bench", 4, 1004, 1887, 1.0, lookahead=False), 0.381,
             "2026-12-04-streaming-deepseek_v3.md")]:
        plan = plan_memory(MODELS[model], mc)
        add("D profile", f"{MODELS[model]['label']}: uniform hit rate ({plan['slots']} slots of "
            f"{MODELS[model]['moe_layers'] * MODELS[model]['experts']})", "shown", measured, plan["fraction"], "",
            src, "not in a bound: the hit curve is an input (the lead's cache simulator)")

    # B. Time to first token: the union of the prompt's experts, the slices, the cache, I/O vs compute.
    for n, fio, ttft in [(1, 251, 8.52), (2, 502, 4.30), (3, 752, 2.87), (4, 1004, 2.20)]:
        mc = rig_machine("dsv3-bench", n, fio, 1887, 1.0, lookahead=False)
        add("B TTFT", f"DeepSeek-V3 bench, 12-token prompt, {n} drives", "hold-out", ttft,
            prefill(MODELS["dsv3-bench"], mc, 12, cal)["ttft_s"], "s", "2026-12-04-streaming-deepseek_v3.md")
    for n, fio, ttft in [(1, 251, 19.7), (2, 501, 9.84), (3, 752, 6.87), (4, 1002, 5.04)]:
        mc = rig_machine("k3-bench", n, fio, 1887, 1.0, layout="whole")
        add("B TTFT", f"K3 bench, 8-token prompt, cold, {n} drives (whole files)", "hold-out", ttft,
            prefill(MODELS["k3-bench"], mc, 8, cal)["ttft_s"], "s", "2026-11-30-suites/table.md")
    # K3 bench on 2 x 400 MB/s; compute = the same session's all-resident run (an input: the prefill
    # rows check the I/O, the slices, the cache and the overlap, not the compute model).
    pf = [("16 tokens", 16, 1.82, 6.98, "2026-11-30-prefill/table.md", "whole"),
          ("128 tokens", 128, 9.87, 10.14, "2026-11-30-prefill/table.md", "whole"),
          ("512 tokens", 512, 38.46, 39.12, "2026-11-30-prefill/table.md", "whole"),
          ("16 tokens, striped", 16, 1.62, 6.96, "2026-11-30-prefill-striped/table.md", "striped"),
          ("128 tokens, striped", 128, 8.61, 8.23, "2026-11-30-prefill-striped/table.md", "striped")]
    for label, p, comp, ttft, src, layout in pf:
        mc = rig_machine("k3-bench", 2, 801, 1887, 1.0, layout=layout)
        add("B TTFT", f"K3 bench, {label}, 2 x 400 MB/s", "hold-out", ttft,
            prefill(MODELS["k3-bench"], mc, p, cal, compute_s=comp)["ttft_s"], "s", src,
            "compute from the same session's resident run")
    mc = rig_machine("k3-bench", 2, 801, 1887, 1.0)
    add("B TTFT", "K3 bench, 512 tokens, 1.0 GB cache: read amplification", "hold-out", 1.38,
        prefill(MODELS["k3-bench"], mc, 512, cal, compute_s=38.46)["amplification"], "x",
        "2026-11-30-prefill/table.md", "56 slots < the 64-expert union: 3 later slices re-read 1/8")
    mc = rig_machine("k3-bench", 2, 802, 2200, 1.2)
    add("B TTFT", "K3 bench, 512 tokens, 1.2 GB cache: read amplification", "hold-out", 1.00,
        prefill(MODELS["k3-bench"], mc, 512, cal, compute_s=37.35)["amplification"], "x",
        "2026-11-30-prefill-slices/table.md", "68 slots hold the union")
    for p, ttft in [(16, 7.85), (128, 7.00)]:
        mc = rig_machine("qwen3-bench", 2, 802, 1887, 1.0, lookahead=False, chunk=0)
        add("B TTFT", f"Qwen3-MoE bench, {p}-token prompt, 2 x 400 MB/s", "shown", ttft,
            prefill(MODELS["qwen3-bench"], mc, p, cal, compute_s={16: 0.55, 128: 2.56}[p])["ttft_s"], "s",
            "2026-12-02-prefill-qwen3_moe.md",
            "outside the model: no lookahead and a cache (26) below a layer's union (29-32); the drives ran "
            "at 570-690 of 802 MB/s")

    # E. Compute: bench checkpoint resident, 2 threads, from one-thread kernel rates.
    add("E compute", "Zen 5, decode, every weight resident", "fit", 19.89,
        1.0 / resident_decode_s(ZEN5, cal["insitu_t1"]), "tokens/s", "2026-12-03-expert-groups/llama-cpp/table.txt")
    add("E compute", "Zen 5, prompt 128, every weight resident", "fit", 35.30,
        128 / resident_prefill_s(ZEN5, cal["insitu_batched"], 128), "tokens/s",
        "2026-12-03-expert-groups/llama-cpp/table.txt")
    add("E compute", "Zen 4, decode, every weight resident", "hold-out", 13.65,
        1.0 / resident_decode_s(ZEN4, cal["insitu_t1"]), "tokens/s", "2026-12-03-decode-step-2/README.md",
        "its profile: the T = 1 MXFP4 loop ran at 0.95 of its kernel rate in situ, Zen 5's at 0.78")
    add("E compute", "Zen 4, prompt 128, every weight resident", "hold-out", 24.24,
        128 / resident_prefill_s(ZEN4, cal["insitu_batched"], 128), "tokens/s", "2026-12-03-decode-step-2/README.md")
    for p, s in [(16, 1.82), (128, 9.87), (512, 38.46)]:
        add("E compute", f"Xeon rig, prompt {p}, every weight resident", "shown", p / s,
            p / resident_prefill_s(XEON_RIG, cal["insitu_batched"], p), "tokens/s", "2026-11-30-prefill/table.md",
            "2 threads gave 0.96 of one thread's kernel plateau (Zen 4 1.57, Zen 5 1.76): the 2 vCPUs act as one "
            "core's worth (SMT siblings?), and the engine predates abbc423 and 581bb8d")
    for r in rows:
        r["error"] = r["predicted"] / r["measured"] - 1.0
    return rows


# The stated bounds: every hold-out row of a group within its bound.
BOUNDS = {"A decode": 0.10, "B TTFT": 0.10, "E compute": 0.30}


def check_report(rows):
    lines = ["| group | measurement | role | measured | predicted | error | source | note |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['group']} | {r['label']} | {r['role']} | {r['measured']:.3g} {r['unit']} | "
                     f"{r['predicted']:.3g} | {r['error'] * 100:+.1f} % | {r['source']} | {r['note']} |")
    summary, failures = [], []
    for g, bound in BOUNDS.items():
        held = [r for r in rows if r["group"] == g and r["role"] == "hold-out"]
        errs = [abs(r["error"]) for r in held]
        worst = max(held, key=lambda r: abs(r["error"]))
        within = sum(1 for e in errs if e <= bound)
        summary.append(f"- {g}: {within} of {len(held)} hold-out rows within {bound * 100:.0f} % "
                       f"(median |error| {statistics.median(errs) * 100:.1f} %); worst {worst['error'] * 100:+.1f} % "
                       f"on {worst['label']}")
        failures += [r for r in held if abs(r["error"]) > bound]
    return "\n".join(lines), "\n".join(summary), failures


# ---------------------------------------------------------------------------
# The projection tables
# ---------------------------------------------------------------------------

# The four-SSD fork's drive ladder (github.com/argonautlabsai/deltafin, k3-public-bench/results/SCALING.md,
# 2026-09-08): tokens/s on 1..4 drives, and the drives' standalone read ceilings (13.6, 7.1, 7.1, 5.1 GB/s:
# internal SSD, SN8100, SN8100, SN7100 at high queue depth).
FORK_LADDER_GBPS = [13.6, 20.7, 27.8, 32.9]
FORK_LADDER = [
    ("generation 128, drafter off", [0.4269, 0.6245, 0.7855, 0.8630]),
    ("generation 128, drafter on", [0.5350, 0.7596, 0.9375, 1.0377]),
    ("generation 512, drafter on, first 300 tokens", [0.5160, 0.7382, 0.9201, 1.0271]),
    ("France prompt, 17 tokens, median of 3", [0.5483, 0.7485, 0.8869, 0.9631]),
]


def fork_ladder_fit():
    """t = C + V / BW fitted on the fork's 1- and 4-drive rungs, checked on 2 and 3: C is what does not
    shrink with bandwidth (seconds per token), V the bytes read per token over the drives' efficiency."""
    out = []
    bw = FORK_LADDER_GBPS
    for what, tps in FORK_LADDER:
        t = [1.0 / x for x in tps]
        v = (t[0] - t[3]) / (1.0 / bw[0] - 1.0 / bw[3])
        c = t[3] - v / bw[3]
        pred = [1.0 / (c + v / b) for b in bw]
        out.append({"what": what, "c": c, "v": v, "measured": tps, "pred": pred})
    return out


def fmt_s(s):
    return f"{s:.0f} s" if s >= 100 else f"{s:.1f} s"


def project(machines, profiles, cal, prompt):
    rows, prefills = [], []
    for mc in machines:
        model = MODELS[mc["model"]]
        one = dict(mc, prefill_chunk=0)
        prefills.append({"machine": mc, "default": prefill(model, mc, prompt, cal),
                         "one_slice": prefill(model, one, prompt, cal),
                         "slow": prefill(model, mc, prompt, cal, compute_scale=0.5),
                         "fast": prefill(model, mc, prompt, cal, compute_scale=2.0)})
        plan = plan_memory(model, mc)
        for pname, prof in profiles.items():
            try:
                h = hit_rate(prof, pname, plan["fraction"])
            except BeyondCurve as e:
                print(f"project.py: {mc['name']}: no prediction: {e}", file=sys.stderr)
                rows.append({"machine": mc, "profile": pname, "placeholder": prof["placeholder"], "decode": None,
                             "plan": plan, "beyond": prof["points"][-1][0]})
                continue
            rows.append({"machine": mc, "profile": pname, "placeholder": prof["placeholder"],
                         "decode": decode(model, mc, h, cal),
                         "slow": decode(model, mc, h, cal, compute_scale=0.5)["tokens_per_s"],
                         "fast": decode(model, mc, h, cal, compute_scale=2.0)["tokens_per_s"],
                         "no_lookahead": decode(model, dict(mc, lookahead=False), h, cal)["tokens_per_s"]})
    return rows, prefills


def published(mc, key):
    out = []
    for p in mc.get("published", []):
        if p.get(key) is not None:
            v = f"{p[key]:.3g} tok/s" if key == "decode_tps" else f"{p[key]:.0f} s ({p.get('prompt', '?')} tokens)"
            out.append(f"{p['what']}: {v}" + (f" ({p['comparable']})" if p.get("comparable") else ""))
    return "; ".join(out)


def decode_table(rows):
    t = ["| machine | profile | spine | expert cache | hit rate | GB read / token | decode tok/s "
         "| CPU half .. twice as fast | lookahead off | bound | published |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mc, d = r["machine"], r["decode"]
        prof = r["profile"] + (" (placeholder)" if r["placeholder"] else "")
        if d is None:
            plan = r["plan"]
            t.append(f"| {mc['label']} | {prof} | | {plan['cache_bytes'] / GB:.1f} GB ({plan['fraction'] * 100:.2f} %) "
                     f"| beyond the curve (it ends at {r['beyond'] * 100:.2f} %) | | | | | | |")
            continue
        plan = d["plan"]
        spine = f"{plan['spine_format']} {plan['spine_bytes'] / GB:.1f} GB"
        if plan["overflow_bytes"] > 0:
            spine += f", {plan['overflow_bytes'] / GB:.1f} GB of it re-read per token"
        cache = f"{plan['cache_bytes'] / GB:.1f} GB ({plan['fraction'] * 100:.2f} %)"
        t.append(f"| {mc['label']} | {prof} | {spine} | {cache} | {d['hit']:.3f} | {d['read_bytes'] / GB:.2f} | "
                 f"**{d['tokens_per_s']:.3g}** | {r['slow']:.3g} .. {r['fast']:.3g} | {r['no_lookahead']:.3g} | "
                 f"{d['bound']} | {published(mc, 'decode_tps')} |")
    return "\n".join(t)


def breakdown_table(rows, first):
    t = ["| machine | spine compute (serial) s | spine re-read (serial) s | routed experts + CRC (overlaps reads) s "
         "| demand reads not hidden s | s / token |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["profile"] != first or r["decode"] is None:
            continue
        d = r["decode"]
        t.append(f"| {r['machine']['label']} | {d['spine_s']:.3f} | {d['overflow_s']:.3f} | {d['expert_s']:.3f} | "
                 f"{d['io_s']:.3f} | {d['s_per_token']:.3f} |")
    return "\n".join(t)


def prefill_table(prefills, prompt):
    t = [f"| machine | TTFT, {prompt}-token prompt (128-row slices) | reads / amplification | compute "
         "| CPU half .. twice as fast | one slice (--prefill-chunk 0) | published |",
         "|---|---|---|---|---|---|---|"]
    for p in prefills:
        d, one = p["default"], p["one_slice"]
        t.append(f"| {p['machine']['label']} | **{fmt_s(d['ttft_s'])}** ({d['bound']}) | {fmt_s(d['io_s'])} / "
                 f"x{d['amplification']:.2f} | {fmt_s(d['compute_s'])} | {fmt_s(p['slow']['ttft_s'])} .. "
                 f"{fmt_s(p['fast']['ttft_s'])} | {fmt_s(one['ttft_s'])} (x{one['amplification']:.2f}) | "
                 f"{published(p['machine'], 'ttft_s')} |")
    return "\n".join(t)


def ladder_table(rows, machines, first):
    by_name = {r["machine"]["name"]: r for r in rows if r["profile"] == first}
    lines = []
    for mc in machines:
        if not mc.get("ladder_of"):
            continue
        top, mine = by_name[mc["ladder_of"]], by_name[mc["name"]]
        if top["decode"] is None or mine["decode"] is None:
            continue
        bw = sum(d["gbps"] for d in mc["drives"])
        bw_top = sum(d["gbps"] for d in top["machine"]["drives"])
        ratio = mine["decode"]["tokens_per_s"] / top["decode"]["tokens_per_s"]
        lines.append(f"| {mc['label']} | {bw:.1f} GB/s | {bw / bw_top * 100:.0f} % | {ratio * 100:.0f} % "
                     f"| {mc.get('ladder_published', '')} |")
    if not lines:
        return ""
    head = [f"deltafin's projected ladder (profile {first}), each rung as a share of the four drives' decode:", "",
            "| rung | drives' ceilings | bandwidth share | projected decode share | published (four-SSD fork) |",
            "|---|---|---|---|---|"]
    fits = fork_ladder_fit()
    fl = ["", "The fork's own ladder against t = C + V / BW (BW = the rung's summed ceilings 13.6 / 20.7 / 27.8 / "
              "32.9 GB/s; C and V fitted on rungs 1 and 4, rungs 2 and 3 held out):", "",
          "| series | C, s / token | V, GB | rung 2: fitted / measured share | rung 3 | error on rungs 2, 3 |",
          "|---|---|---|---|---|---|"]
    for f in fits:
        sh = [x / f["pred"][3] for x in f["pred"]]
        ms = [x / f["measured"][3] for x in f["measured"]]
        err = [f["pred"][i] / f["measured"][i] - 1 for i in (1, 2)]
        fl.append(f"| {f['what']} | {f['c']:.3f} | {f['v']:.1f} | {sh[1] * 100:.0f} % / {ms[1] * 100:.0f} % | "
                  f"{sh[2] * 100:.0f} % / {ms[2] * 100:.0f} % | {err[0] * 100:+.1f} %, {err[1] * 100:+.1f} % |")
    return "\n".join(head + lines + fl)


def calibration_text(cal):
    return "\n".join([
        f"- drive efficiency (achieved / fio, striped): {cal['drive_efficiency']:.3f} "
        "(2026-11-30-streaming, K3 bench on one drive)",
        f"- T = 1 products, end-to-end / bench_kernels one-thread rate: {cal['insitu_t1']:.3f} "
        "(Zen 5, bench checkpoint resident: 19.89 tokens/s)",
        f"- batched products, end-to-end / kernel curve: {cal['insitu_batched']:.3f} "
        "(Zen 5, prompt 128 resident: 35.30 tokens/s)",
    ])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hardware", default=DEFAULT_HARDWARE)
    ap.add_argument("--profiles", default=DEFAULT_PROFILES)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--no-checks", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.prompt < 1:
            raise InputError(f"--prompt must be at least 1, got {a.prompt}")
        machines = load_hardware(a.hardware)
        profiles = load_profiles(a.profiles)
        cal = fit_calibration()
        rows, prefills = project(machines, profiles, cal, a.prompt)
    except InputError as e:
        print(f"project.py: {e}", file=sys.stderr)
        return 2
    first = next(iter(profiles))
    s = k3_spine()
    out = [f"# K3 projection ({os.path.relpath(a.hardware)}, {os.path.relpath(a.profiles)})", "",
           f"K3: {s['params'] / 1e9:.2f} B spine parameters, BF16 {s['bf16'] / GB:.1f} GB, int8-row "
           f"{s['int8'] / GB:.1f} GB; bank {bank_bytes(MODELS['k3']) / GB:.1f} GB; "
           f"{MODELS['k3']['moe_layers'] * 16 * MODELS['k3']['record_bytes'] / GB:.2f} GB of experts per cold token.",
           "", "## Calibration", "", calibration_text(cal), "",
           "## Decode", "", decode_table(rows), "",
           f"Where a token's time goes (profile {first}):", "", breakdown_table(rows, first), "",
           "## Time to first token", "",
           "The prompt's expert union assumes uniform routing (an upper bound on the bytes for skewed routing).", "",
           prefill_table(prefills, a.prompt), "", "## Drive-count ladder", "", ladder_table(rows, machines, first), ""]
    status = 0
    if not a.no_checks:
        report, summary, failures = check_report(checks(cal))
        out += ["## Hold-out check", "", "Bounds: " + ", ".join(f"{g} {b * 100:.0f} %" for g, b in BOUNDS.items())
                + " (every hold-out row).", "", summary, "", report, ""]
        if failures:
            status = 1
            for r in failures:
                print(f"project.py: hold-out bound exceeded: {r['group']}: {r['label']}: predicted "
                      f"{r['predicted']:.3g}, measured {r['measured']:.3g} ({r['error'] * 100:+.1f} %, bound "
                      f"{BOUNDS[r['group']] * 100:g} %)", file=sys.stderr)
    text = "\n".join(out)
    print(text)
    if a.markdown:
        try:
            with open(a.markdown, "w") as f:
                f.write(text + "\n")
        except OSError as e:
            print(f"project.py: --markdown {a.markdown}: cannot write ({e.strerror})", file=sys.stderr)
            return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
