#!/usr/bin/env python3
"""Table for bench/prefill/run.sh: TTFT of expert-major prefill against its
floor (max of the I/O bound and the measured compute bound) and against
token-by-token prefill.  usage: table.py OUT_DIR CONFIG_JSON "16 128 512" """
import json, re, sys

out, config_path, lengths = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split()]
cfg = json.load(open(config_path))
t = cfg.get("text_config", cfg)
if cfg.get("model_type") == "qwen3_moe":  # docs/qwen3-moe.md: experts on the hidden width
    L, step, only = t["num_hidden_layers"], t.get("decoder_sparse_step", 1), t.get("mlp_only_layers", [])
    moe_layers = sum(1 for l in range(L) if l not in only and (l + 1) % step == 0)
    top_k, mid, lat = t["num_experts_per_tok"], t["moe_intermediate_size"], t["hidden_size"]
else:
    moe_layers = t["num_hidden_layers"] - t.get("first_k_dense_replace", 1)
    top_k, mid, lat = t["num_experts_per_token"], t["moe_intermediate_size"], t["routed_expert_hidden_size"]
expert_flops_per_pos = moe_layers * top_k * 3 * 2 * mid * lat

fio = json.load(open(f"{out}/fio.json"))
fio_bw = sum(j["read"]["bw_bytes"] for j in fio["jobs"])

def resident_prefill_ms(P):
    text = open(f"{out}/resident-{P}.log").read()
    m = re.search(r"prefill ([0-9.]+) ms", text)
    return float(m.group(1))

print()
print(f"drives: fio {fio_bw / 1e6:.0f} MB/s aggregate; routed-expert FLOPs {expert_flops_per_pos / 1e9:.2f} GFLOP per position")
print()
print("| prompt | TTFT s | I/O bound s | compute bound s | floor | TTFT / floor | bound | amplification | "
      "token-by-token s | tbt amplification | speedup |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for P in lengths:
    em = json.load(open(f"{out}/expert-major-{P}.json"))
    tb = json.load(open(f"{out}/token-by-token-{P}.json"))
    ttft = em["prefill"]["ttft_ms"] / 1e3
    unique = em["prefill"]["unique_bytes"]
    io_s = unique / fio_bw
    comp_s = resident_prefill_ms(P) / 1e3
    floor = max(io_s, comp_s)
    bound = "I/O" if io_s >= comp_s else "compute"
    tb_pos = tb["prefill"]["positions"]
    tb_s = tb["prefill"]["ttft_ms"] / 1e3
    label = ""
    if tb_pos < P:
        tb_s = tb_s * P / tb_pos
        label = f" (extrapolated from {tb_pos})"
    gflops = expert_flops_per_pos * P / comp_s / 1e9
    print(f"| {P} | {ttft:.2f} | {io_s:.2f} | {comp_s:.2f} ({gflops:.0f} GFLOP/s) | {floor:.2f} | {ttft / floor:.3f} | {bound} | "
          f"{em['prefill']['amplification']:.2f} | {tb_s:.1f}{label} | {tb['prefill']['amplification']:.2f} | {tb_s / ttft:.1f}x |")
