#!/usr/bin/env python3
"""Run llama.cpp's own convert_hf_to_gguf.py on a deltafin K3-architecture checkpoint.

    convert_k3.py LLAMA_SRC MODEL_DIR OUT.gguf

LLAMA_SRC is a llama.cpp source tree (the one bundled in node-llama-cpp), MODEL_DIR a
checkpoint from `deltafin make-model --arch k3` (e.g. --preset bench). The tensors go
through llama.cpp's unmodified converter (conversion/kimi_k3.py: the `kimi-k3`
architecture, routed experts repacked from compressed-tensors MXFP4 to ggml MXFP4
without requantising, every other weight kept as BF16, 1-D tensors F32 as usual).

Only what that converter would import from PyPI is stood in for here, because this
machine has Debian's packages only (numpy and torch 1.13 come from Debian; Hugging
Face `transformers` is not packaged there):

* `transformers.AutoConfig` -- raises, so the converter takes its own documented
  fallback and reads config.json directly.
* `transformers.AutoTokenizer` -- returns a small reader of the checkpoint's
  `tiktoken.model` + `tokenizer_config.json` with the three members that
  kimi_linear.py's set_vocab reads (model._mergeable_ranks, special_tokens, eos_id),
  laid out the way Kimi's tokenization_kimi.py lays them out (reserved ids
  `<|reserved_token_N|>` unless tokenizer_config names them). The real K3 tokenizer
  ships that file as remote code, which a made-up checkpoint does not carry.
* `transformers.convert_slow_tokenizer.bytes_to_unicode` -- GPT-2's byte map.
* torch.float8_e4m3fn / torch.float8_e5m2 -- Debian 12's torch is 1.13, which predates
  them; the converter names them in class-level dtype tables, so they are pointed at
  complex32 / complex64, dtypes no K3 checkpoint holds (they only key those tables).
* `get_vocab_base_pre` -- the converter identifies the pre-tokenizer by hashing the
  token ids of a probe string, which only matches for the real 163,584-rank
  vocabulary. The bench checkpoint uses K3's (= Kimi K2's) pre-tokenizer pattern
  (docs/k3-model.md section 8.2) with a 768-rank vocabulary, so the answer is fixed
  to "kimi-k2".

None of these touches a weight.
"""
from __future__ import annotations

import base64
import json
import logging
import sys
import types
from pathlib import Path


def bytes_to_unicode() -> dict[int, str]:
    # GPT-2's reversible byte -> printable character map
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


class _TikTokenModel:
    def __init__(self, ranks: dict[bytes, int]):
        self._mergeable_ranks = ranks


class KimiTikTokenStandIn:
    """What kimi_linear.py's set_vocab reads from Kimi's TikTokenTokenizer."""

    def __init__(self, model_dir: Path):
        ranks: dict[bytes, int] = {}
        for line in (model_dir / "tiktoken.model").read_text(encoding="utf-8").splitlines():
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
        self.model = _TikTokenModel(ranks)
        n_base = len(ranks)
        cfg = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
        decoder = {int(k): v["content"] for k, v in cfg.get("added_tokens_decoder", {}).items()}
        self.special_tokens = {decoder.get(i, f"<|reserved_token_{i}|>"): i for i in range(n_base, n_base + 256)}
        self.eos_id = self.special_tokens[cfg["eos_token"]] if "eos_token" in cfg else n_base + 1
        # no `vocab` attribute on purpose: the converter first tries the generic
        # Hugging Face path (_set_vocab_gpt2), which must fail as it does for the real
        # TikTokenTokenizer, so that the Kimi path runs


def install_stand_ins(model_dir: Path) -> None:
    tr = types.ModuleType("transformers")

    class AutoConfig:
        @staticmethod
        def from_pretrained(*_a, **_k):
            raise OSError("transformers is not installed (Debian has no package); reading config.json")

    class AutoTokenizer:
        @staticmethod
        def from_pretrained(path, *_a, **_k):
            return KimiTikTokenStandIn(Path(path))

    tr.AutoConfig = AutoConfig
    tr.AutoTokenizer = AutoTokenizer
    cst = types.ModuleType("transformers.convert_slow_tokenizer")
    cst.bytes_to_unicode = bytes_to_unicode
    tr.convert_slow_tokenizer = cst
    sys.modules["transformers"] = tr
    sys.modules["transformers.convert_slow_tokenizer"] = cst


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    src, model_dir, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), sys.argv[3]
    install_stand_ins(model_dir)
    sys.path[:0] = [str(src / "gguf-py"), str(src)]

    import torch
    for name, stand_in in (("float8_e4m3fn", torch.complex32), ("float8_e5m2", torch.complex64)):
        if not hasattr(torch, name):
            setattr(torch, name, stand_in)

    import conversion.base as base  # noqa: E402  (after the stand-ins)

    def get_vocab_base_pre(self, tokenizer) -> str:
        logging.getLogger("convert_k3").info("pre-tokenizer fixed to kimi-k2 (K3's pattern, docs/k3-model.md 8.2)")
        return "kimi-k2"

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre

    import convert_hf_to_gguf  # noqa: E402

    sys.argv = ["convert_hf_to_gguf.py", str(model_dir), "--outfile", out, "--outtype", "bf16"]
    convert_hf_to_gguf.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
