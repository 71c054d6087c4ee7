// deltafin inspect: load and validate a checkpoint, print what it is.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/tensors.h"
#include "format/mxfp4.h"
#include "model/kimi_k3/session.h"
#include "model/qwen3/qwen3_session.h"
#include "model/qwen3_moe/family_checkpoint.h"
#include "model/qwen3_moe/qwen3_moe_weights.h"
#include "model/registry.h"
#include "util/error.h"
#include "util/progress.h"

namespace deltafin::cli {

namespace {
struct InspectArgs {
  std::string model;
  bool verify_experts = false;
};

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

// Session memory at a few context lengths (the memory plan's figure; no
// session is made): the fixed state plus bytes per position times positions.
void print_session_figures(uint64_t fixed, uint64_t per_position, int64_t max_positions, const char* what) {
  std::printf("  session: %s fixed + %llu B per position (%s)", human_bytes(static_cast<double>(fixed)).c_str(),
              static_cast<unsigned long long>(per_position), what);
  for (int64_t n : {int64_t{32768}, int64_t{131072}, int64_t{1} << 20})
    std::printf("; %lldk: %s", static_cast<long long>(n / 1024),
                human_bytes(static_cast<double>(fixed + per_position * static_cast<uint64_t>(n))).c_str());
  std::printf(" (config's context %lld)\n", static_cast<long long>(max_positions));
}

int inspect_qwen3_moe(const InspectArgs& a) {
  // Every tensor's dtype and shape checked from the headers, nothing read
  // (a Qwen3-235B-A22B spine is 10 GB).
  const Qwen3MoeFamilyCheckpoint family(a.model);
  const Qwen3MoeConfig& c = family.config();
  const Checkpoint& ck = family.tensors();
  uint64_t spine_bytes = 0;
  for (const SpineTensorSpec& t : family.spine_tensors()) spine_bytes += t.tensor.bytes();
  const Qwen3Config& b = c.base;
  const uint64_t expert_bytes = c.moe_layers().size() * static_cast<uint64_t>(c.num_experts) * c.expert_record_bytes();
  std::printf("%s: Qwen3-MoE checkpoint (Qwen3MoeForCausalLM)\n", a.model.c_str());
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
  if (a.verify_experts)
    for (int64_t l : c.moe_layers())
      for (int64_t e = 0; e < c.num_experts; ++e) read_qwen3_moe_expert_record(c, ck, l, e);  // dtype and shape
  return 0;
}

int run(const InspectArgs& a) {
  const FamilyInfo& family = detect_checkpoint_family(a.model);
  if (family.family == Family::Qwen3Moe) return inspect_qwen3_moe(a);
  if (family.family != Family::KimiK3)
    fail(a.model, ": a ", family.what, " checkpoint; inspect describes target models (kimi_k3, qwen3_moe)");
  K3Checkpoint k = load_k3_checkpoint(a.model);
  const K3Config& c = k.config;
  std::string kinds;
  int64_t mla = 0;
  for (LayerKind kind : c.layer_kinds) {
    kinds += kind == LayerKind::MLA ? 'M' : 'K';
    mla += kind == LayerKind::MLA;
  }
  uint64_t expert_bytes = static_cast<uint64_t>(c.num_hidden_layers - 1) * c.num_experts * k3_expert_record_bytes(c);
  uint64_t total = k.tensors.total_bytes();
  std::printf("%s: %s\n", a.model.c_str(), k.pinned_revision ? "Kimi K3 (pinned revision)" : "K3-architecture checkpoint");
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
  if (a.verify_experts) verify_experts(k);
  return 0;
}
}  // namespace

Command add_inspect(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand("inspect", "Load and validate a checkpoint and describe it");
  sub->add_option("--model", a->model, "Hugging Face checkpoint directory")->required();
  sub->add_flag("--verify-experts", a->verify_experts, "Check every expert record (K3: every MXFP4 scale, k3-model.md 4.3; Qwen3-MoE: dtypes and shapes)");
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
