#include "model/qwen3_moe/qwen3_moe_generator.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "model/common/routing_profile.h"
#include "model/qwen3/qwen3_generator.h"
#include "model/qwen3_moe/qwen3_moe_weights.h"
#include "util/error.h"

namespace deltafin {

Qwen3MoeDims qwen3_moe_preset(const std::string& name) {
  Qwen3MoeDims d;
  if (name == "tiny") {
    d.hidden = 64, d.layers = 3, d.heads = 4, d.kv_heads = 2, d.head_dim = 32, d.vocab = 320;
    d.intermediate = 96, d.moe_intermediate = 32, d.experts = 8, d.top_k = 2;
  } else if (name == "small") {
    d.hidden = 512, d.layers = 4, d.heads = 8, d.kv_heads = 2, d.head_dim = 64, d.vocab = 800;
    d.intermediate = 1536, d.moe_intermediate = 256, d.experts = 64, d.top_k = 8;
  } else if (name == "bench") {
    d.hidden = 4096, d.layers = 4, d.heads = 64, d.kv_heads = 4, d.head_dim = 128, d.vocab = 800;
    d.intermediate = 12288, d.moe_intermediate = 1536, d.experts = 32, d.top_k = 8;
  } else {
    fail("make-model --arch qwen3_moe: unknown preset \"", name, "\" (tiny, small or bench)");
  }
  return d;
}

Qwen3MoeGenerateResult generate_qwen3_moe_checkpoint(const Qwen3MoeGenerateOptions& o) {
  const Qwen3MoeDims& d = o.dims;
  if (d.vocab < 256 + 1 + kQwen3AddedTokens)
    fail("make-model: --vocab ", d.vocab, " is too small: 256 byte tokens + at least one merge + ", kQwen3AddedTokens,
         " added tokens");
  Qwen3MoeConfig want;
  Qwen3Config& b = want.base;
  b.hidden_size = d.hidden;
  b.intermediate_size = d.intermediate;
  b.num_hidden_layers = d.layers;
  b.num_attention_heads = d.heads;
  b.num_key_value_heads = d.kv_heads;
  b.head_dim = d.head_dim;
  b.vocab_size = d.vocab;
  b.max_position_embeddings = o.max_position_embeddings;
  b.rms_norm_eps = o.rms_norm_eps;
  b.rope_theta = o.rope_theta;
  b.tie_word_embeddings = o.tie_word_embeddings;
  if (o.yarn_factor > 0) {
    b.yarn.enabled = true;
    b.yarn.factor = o.yarn_factor;
    b.yarn.original_max_position_embeddings =
        o.yarn_original_max_positions > 0 ? o.yarn_original_max_positions : o.max_position_embeddings;
    b.yarn.attention_factor = 0.1 * std::log(o.yarn_factor) + 1.0;
  }
  const int64_t extra = o.script ? static_cast<int64_t>(scripted_extra_tokens(*o.script).size()) : 0;
  const int64_t n_bpe = d.vocab - kQwen3AddedTokens - extra;
  b.bos_token_id = n_bpe;               // <|endoftext|>
  b.eos_token_ids = {n_bpe + 2};        // <|im_end|>, as the released chat checkpoints
  want.moe_intermediate_size = d.moe_intermediate;
  want.num_experts = d.experts;
  want.num_experts_per_tok = d.top_k;
  want.decoder_sparse_step = d.decoder_sparse_step;
  want.norm_topk_prob = d.norm_topk_prob;
  want.mlp_only_layers = d.mlp_only_layers;
  nlohmann::json config_json = qwen3_moe_config_json(want);
  std::optional<RoutingShaper> shaper;
  if (!o.routing_profile.empty() && o.routing_profile != "uniform") {
    if (o.script)
      fail("make-model: --script and --routing-profile exclude each other (a scripted model has no random routing)");
    const RoutingProfile& p = routing_profile(o.routing_profile);
    shaper.emplace(p, p.qwen3_moe, d.experts, d.top_k, o.seed, "mlp.gate.weight", "");
    const Qwen3MoeConfig plain = parse_qwen3_moe_config(config_json, "generated config.json");
    config_json[kRoutingProfileKey] = shaper->record(plain.moe_layers());
  }
  // Our own config goes through the real parser first: the generator never
  // writes a checkpoint the runtime would refuse (nor one whose profile
  // record the parser would not ignore).
  const Qwen3MoeConfig config = parse_qwen3_moe_config(config_json, "generated config.json");
  const std::vector<TensorSpec> tensors = qwen3_moe_tensor_specs(config);
  Qwen3CheckpointFiles files{o.out_dir, o.seed, o.force, o.shards, d.vocab, o.max_position_embeddings,
                             o.tie_word_embeddings, o.script ? &*o.script : nullptr, d.hidden,
                             shaper ? &*shaper : nullptr};
  Qwen3MoeGenerateResult r;
  r.payload_bytes = write_qwen3_checkpoint_files(files, tensors, config_json);
  r.config = config;
  r.tensors = tensors.size();
  return r;
}

}  // namespace deltafin
