#include "model/kimi_k3/presets.h"

#include "util/error.h"

namespace deltafin {

std::vector<int64_t> default_full_attn_layers(int64_t layers) {
  std::vector<int64_t> out;
  for (int64_t l = 4; l < layers; l += 4) out.push_back(l);
  out.push_back(layers);
  return out;
}

K3Dims preset_dims(const std::string& name) {
  K3Dims d;
  if (name == "tiny") {
    d.hidden = 64; d.layers = 10; d.vocab = 768; d.intermediate = 128;
    d.experts = 16; d.top_k = 4; d.latent = 32; d.moe_intermediate = 64;
    d.kda_heads = 2; d.kda_head_dim = 32;
    d.mla_heads = 2; d.q_lora = 32; d.kv_lora = 32; d.nope = 16; d.rope = 8; d.v_dim = 16;
  } else if (name == "small") {
    d.hidden = 256; d.layers = 14; d.vocab = 1024; d.intermediate = 512;
    d.experts = 64; d.top_k = 16; d.latent = 128; d.moe_intermediate = 96;
    d.kda_heads = 4; d.kda_head_dim = 32;
    d.mla_heads = 4; d.q_lora = 64; d.kv_lora = 64; d.nope = 32; d.rope = 16; d.v_dim = 32;
  } else if (name == "bench") {
    // Real K3 expert dimensions (17,547,264-byte records) around a small spine,
    // so the I/O pattern is the real one; layers and experts come from flags.
    d.hidden = 512; d.layers = 6; d.vocab = 1024; d.intermediate = 1024;
    d.experts = 64; d.top_k = 16; d.latent = 3584; d.moe_intermediate = 3072;
    d.kda_heads = 4; d.kda_head_dim = 64;
    d.mla_heads = 4; d.q_lora = 128; d.kv_lora = 128; d.nope = 64; d.rope = 32; d.v_dim = 64;
  } else if (name == "k3") {
    d.hidden = 7168; d.layers = 93; d.block = 12; d.vocab = 163840; d.intermediate = 33792;
    d.experts = 896; d.top_k = 16; d.latent = 3584; d.moe_intermediate = 3072;
    d.kda_heads = 96; d.kda_head_dim = 128;
    d.mla_heads = 96; d.q_lora = 1536; d.kv_lora = 512; d.nope = 128; d.rope = 64; d.v_dim = 128;
  } else {
    fail("unknown preset '", name, "' (expected tiny, small, bench or k3)");
  }
  d.full_attn_layers = default_full_attn_layers(d.layers);
  return d;
}

K3Dims apply_overrides(K3Dims d, const DimOverrides& o) {
  if (o.hidden) d.hidden = *o.hidden;
  if (o.layers) d.layers = *o.layers;
  if (o.experts) d.experts = *o.experts;
  if (o.top_k) d.top_k = *o.top_k;
  if (o.vocab) d.vocab = *o.vocab;
  if (o.latent) d.latent = *o.latent;
  if (o.moe_intermediate) d.moe_intermediate = *o.moe_intermediate;
  if (o.intermediate) d.intermediate = *o.intermediate;
  if (o.layers) d.full_attn_layers = default_full_attn_layers(d.layers);
  if (d.layers < 2) fail("--layers must be at least 2 (layer 0 is dense, the rest MoE), got ", d.layers);
  if (d.top_k > d.experts) fail("--top-k ", d.top_k, " exceeds --experts ", d.experts);
  if (d.vocab < 256 + 256 + 1) fail("--vocab ", d.vocab, " is too small: 256 byte tokens + merges + 256 reserved ids");
  return d;
}

}  // namespace deltafin
