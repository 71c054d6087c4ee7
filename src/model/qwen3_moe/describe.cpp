#include "model/qwen3_moe/describe.h"

#include <cstdio>

#include "model/common/describe.h"
#include "model/qwen3/qwen3_session.h"
#include "model/qwen3_moe/family_checkpoint.h"
#include "model/qwen3_moe/qwen3_moe_weights.h"
#include "util/error.h"
#include "util/progress.h"

namespace deltafin {

void describe_qwen3_moe_checkpoint(const std::string& dir, bool verify) {
  // Every tensor's dtype and shape checked from the headers, nothing read
  // (a Qwen3-235B-A22B spine is 10 GB).
  const Qwen3MoeFamilyCheckpoint family(dir);
  const Qwen3MoeConfig& c = family.config();
  const Checkpoint& ck = family.tensors();
  uint64_t spine_bytes = 0;
  for (const SpineTensorSpec& t : family.spine_tensors()) spine_bytes += t.tensor.bytes();
  const Qwen3Config& b = c.base;
  const uint64_t expert_bytes = c.moe_layers().size() * static_cast<uint64_t>(c.num_experts) * c.expert_record_bytes();
  std::printf("%s: Qwen3-MoE checkpoint (Qwen3MoeForCausalLM)\n", dir.c_str());
  std::string kinds;
  for (int64_t l = 0; l < b.num_hidden_layers; ++l) kinds += c.is_moe_layer(l) ? 'E' : 'D';
  std::printf("  layers %lld (%zu MoE, %zu dense): %s\n", static_cast<long long>(b.num_hidden_layers),
              c.moe_layers().size(), static_cast<size_t>(b.num_hidden_layers) - c.moe_layers().size(), kinds.c_str());
  std::printf("  hidden %lld, vocab %lld, %lld heads (%lld KV, head_dim %lld), RoPE theta %g%s\n",
              static_cast<long long>(b.hidden_size), static_cast<long long>(b.vocab_size),
              static_cast<long long>(b.num_attention_heads), static_cast<long long>(b.num_key_value_heads),
              static_cast<long long>(b.head_dim), b.rope_theta,
              b.yarn.enabled ? cat(", YaRN x", b.yarn.factor, " from ", b.yarn.original_max_position_embeddings).c_str()
                             : "");
  std::printf("  experts %lld per layer, top-%lld%s, intermediate %lld, record %llu bytes (gate|up|down BF16)\n",
              static_cast<long long>(c.num_experts), static_cast<long long>(c.num_experts_per_tok),
              c.norm_topk_prob ? " (renormalised)" : "", static_cast<long long>(c.moe_intermediate_size),
              static_cast<unsigned long long>(c.expert_record_bytes()));
  std::printf("  %zu tensors in %zu shards: spine %s, routed experts %s\n", ck.tensor_count(), ck.shards().size(),
              human_bytes(static_cast<double>(spine_bytes)).c_str(), human_bytes(static_cast<double>(expert_bytes)).c_str());
  print_session_figures(0, Qwen3Session::bytes_per_position(b), b.max_position_embeddings, "fp32 GQA keys and values");
  if (!c.unused_fields.empty()) {
    std::printf("  config fields not used by the runtime:");
    for (const std::string& f : c.unused_fields) std::printf(" %s", f.c_str());
    std::printf("\n");
  }
  if (verify)
    for (int64_t l : c.moe_layers())
      for (int64_t e = 0; e < c.num_experts; ++e) read_qwen3_moe_expert_record(c, ck, l, e);  // dtype and shape
}

}  // namespace deltafin
