#include "model/kimi_k3/describe.h"

#include <cstdio>

#include "format/mxfp4.h"
#include "model/common/describe.h"
#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/session.h"
#include "model/kimi_k3/tensors.h"
#include "util/error.h"
#include "util/progress.h"

namespace deltafin {

namespace {

// The §4.3 import check over every routed expert's scales.
void verify_experts(const K3Checkpoint& k) {
  const K3Config& c = k.config;
  Progress progress("verify experts", static_cast<uint64_t>(c.num_hidden_layers - 1) * c.num_experts *
                                          k3_expert_record_bytes(c));
  for (int64_t l = 1; l < c.num_hidden_layers; ++l)
    for (int64_t e = 0; e < c.num_experts; ++e) {
      std::vector<uint8_t> rec = k.read_expert_record(l, e);
      std::vector<TensorSpec> parts = k3_expert_tensors(c, l, e);
      uint64_t off = 0;
      for (size_t m = 0; m < parts.size(); m += 2) {
        const TensorSpec& packed = parts[m];
        const uint64_t rows = packed.shape[0], cols = packed.shape[1] * 2;
        validate_mxfp4(rec.data() + off, rec.data() + off + packed.bytes(), rows, cols, packed.name);
        off += packed.bytes() + parts[m + 1].bytes();
      }
      progress.add(rec.size());
    }
  progress.finish();
}

}  // namespace

void describe_k3_checkpoint(const std::string& dir, bool verify) {
  K3Checkpoint k = load_k3_checkpoint(dir);
  const K3Config& c = k.config;
  std::string kinds;
  int64_t mla = 0;
  for (LayerKind kind : c.layer_kinds) {
    kinds += kind == LayerKind::MLA ? 'M' : 'K';
    mla += kind == LayerKind::MLA;
  }
  uint64_t expert_bytes = static_cast<uint64_t>(c.num_hidden_layers - 1) * c.num_experts * k3_expert_record_bytes(c);
  uint64_t total = k.tensors.total_bytes();
  std::printf("%s: %s\n", dir.c_str(), k.pinned_revision ? "Kimi K3 (pinned revision)" : "K3-architecture checkpoint");
  std::printf("  layers %lld (%lld KDA, %lld MLA): %s\n", static_cast<long long>(c.num_hidden_layers),
              static_cast<long long>(c.num_hidden_layers - mla), static_cast<long long>(mla), kinds.c_str());
  std::printf("  hidden %lld, vocab %lld, AttnRes block %lld, KDA %lldx%lld, MLA %lld heads\n",
              static_cast<long long>(c.hidden_size), static_cast<long long>(c.vocab_size),
              static_cast<long long>(c.attn_res_block_size), static_cast<long long>(c.kda_num_heads),
              static_cast<long long>(c.kda_head_dim), static_cast<long long>(c.num_attention_heads));
  std::printf("  experts %lld per layer, top-%lld, latent %lld, intermediate %lld, record %llu bytes\n",
              static_cast<long long>(c.num_experts), static_cast<long long>(c.num_experts_per_token),
              static_cast<long long>(c.routed_expert_hidden_size), static_cast<long long>(c.moe_intermediate_size),
              static_cast<unsigned long long>(k3_expert_record_bytes(c)));
  std::printf("  %zu tensors in %zu shards (%zu vision tensors ignored): spine %s, routed experts %s\n",
              k.tensors.tensor_count(), k.tensors.shards().size(), k.ignored_tensors,
              human_bytes(static_cast<double>(total - expert_bytes)).c_str(),
              human_bytes(static_cast<double>(expert_bytes)).c_str());
  if (!c.unused_fields.empty()) {
    std::printf("  config fields not used by the runtime:");
    for (const std::string& f : c.unused_fields) std::printf(" %s", f.c_str());
    std::printf("\n");
  }
  print_session_figures(K3Session::fixed_bytes(c), K3Session::bytes_per_position(c), c.max_position_embeddings,
                        "KDA state + MLA latent cache");
  if (verify) verify_experts(k);
}

}  // namespace deltafin
