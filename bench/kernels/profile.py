#!/usr/bin/env python3
"""Tables bench/kernels/profile.sh: CPU ms per token by category, per phase.

Samples are cpu-clock at 999 Hz over all threads, so a sample is ~1.001 ms of
one thread's CPU. Loading (everything before the first sample in a
forward-pass function: file reads, page faults while the weights are read in,
checksums) happens once per process and is shown apart; the rest is divided by
the tokens the measured and warm-up runs processed (prefill: P per run;
decode: N per run, plus the 4-token prompts' prefill, small). The
difference between threads x wall ms and CPU ms is time a thread was not
running: blocked in a hand-off, or descheduled."""
import json
import re
import sys

CATEGORIES = [
    ("MXFP4 products", r"mxfp4|split_even_odd"),
    ("BF16 / int8-row / F32 products", r"rows_single<|fused_rows<|rows_batched<|rows_small_batch|fused_run<|tile_\dx|matmul_rows|deltafin::matmul"),
    ("attention (MLA, KDA) and softmax", r"attention|kda|mla|softmax|K3Model::attn|lane_tree|\bdot\b|axpy|conv"),
    ("activations (SiTU/SiLU: tanhf, expf)", r"tanh|expm1|__exp|situ|sigmoid|silu"),
    ("norms, routing, residuals", r"rmsnorm|scale_mul|l2_normalize|route|top_k|moe_rows|combine|residual|attn_res"),
    ("thread hand-offs (spin, wake, switch)", r"ThreadPool|futex|pthread_cond|schedule|finish_task_switch|__lll|sched_|try_to_wake|_raw_spin_unlock_irqrestore"),
    ("memory (faults, zeroing, copies, malloc)", r"page_fault|clear_page|do_anonymous|mem(cpy|set|move)|malloc|_int_free|cfree|handle_mm_fault|folio|memcg|lruvec|alloc_pages|rmqueue|pte_|mas_|vma|unmap"),
]


def parse(path):
    rows = []
    for line in open(path):
        m = re.match(r"\s*([\d.]+)%\s+(\d+)\s+\[[.k]\]\s+(.*)", line)
        if m:
            rows.append((int(m.group(2)), m.group(3).strip()))
    return rows


def categorise(rows):
    out = {name: 0 for name, _ in CATEGORIES}
    out["other"] = 0
    for samples, sym in rows:
        for name, pattern in CATEGORIES:
            if re.search(pattern, sym):
                out[name] += samples
                break
        else:
            out["other"] += samples
    return out


def main(out, threads, P, N):
    threads, P, N = int(threads), int(P), int(N)
    print(f"CPU ms per token by category ({threads} threads; samples at 999 Hz over all threads)")
    print()
    for phase in ("prefill", "decode"):
        j = json.load(open(f"{out}/{phase}.json"))
        s = j["summary"]["A"]
        runs_total = s["wall_s"]["n"] + 1  # measured + the warm-up
        cats = categorise(parse(f"{out}/{phase}-symbols.txt"))
        loading = sum(n for n, _ in parse(f"{out}/{phase}-loading.txt"))
        if phase == "prefill":
            tokens = P * runs_total
            wall = s["ttft_ms"]["median"] / P
            label = f"prefill of {P} tokens: TTFT {s['ttft_ms']['median']:.0f} ms, {s['prefill_tokens_per_s']['median']:.2f} tokens/s"
        else:
            tokens = N * runs_total
            wall = 1000.0 / s["decode_tokens_per_s"]["median"]
            label = f"decode: {s['decode_tokens_per_s']['median']:.2f} tokens/s"
        total = sum(cats.values())
        print(f"### {phase} ({label})")
        print()
        print("| category | CPU ms / token | share |")
        print("|---|---|---|")
        for name, n in sorted(cats.items(), key=lambda kv: -kv[1]):
            print(f"| {name} | {n * 1.001 / tokens:.2f} | {n / total:.1%} |")
        cpu = total * 1.001 / tokens
        print(f"| **all but loading** | **{cpu:.2f}** | |")
        print(f"| wall ms / token x {threads} threads | {wall * threads:.2f} | |")
        print(f"| not running (blocked or descheduled) | {wall * threads - cpu:.2f} | |")
        print()
        print(f"(loading, once per process, not per token: {loading * 1.001 / 1000:.1f} CPU s; "
              f"{runs_total} runs of which 1 warm-up)")
        print()


if __name__ == "__main__":
    main(*sys.argv[1:])
