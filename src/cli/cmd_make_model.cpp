// deltafin make-model: generate a small K3-architecture checkpoint, or
// (--arch k3_dspark) a DSpark draft model matching an existing K3 checkpoint.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "model/kimi_k3/config.h"
#include "model/kimi_k3/tensors.h"
#include "model/kimi_k3/generator.h"
#include "model/qwen3/qwen3_generator.h"
#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "model/k3_dspark/generator.h"
#include "model/registry.h"
#include "util/error.h"
#include "util/progress.h"

namespace deltafin::cli {

namespace {
struct MakeModelArgs {
  std::string out, preset = "tiny", arch = "k3", target;
  uint64_t seed = 1;
  uint64_t shard_mb = 4096;
  bool force = false, quiet = false;
  K3DimOverrides dims;
};

template <typename T>
void optional_flag(CLI::App* sub, const std::string& name, std::optional<T>& target, const std::string& help) {
  sub->add_option_function<T>(name, [&target](const T& v) { target = v; }, help);
}

// A DSpark drafter for the K3 checkpoint in --target (k3-model.md §10.2, §14).
int run_dspark(const MakeModelArgs& a) {
  if (a.target.empty()) fail("make-model --arch k3_dspark: --target DIR (the K3 checkpoint to draft for) is required");
  const K3DimOverrides& d = a.dims;
  if (d.hidden || d.experts || d.top_k || d.vocab || d.latent || d.moe_intermediate || d.intermediate)
    fail("make-model --arch k3_dspark: the dimensions come from --target; only --layers (DSpark layers, 1..5) applies");
  DSparkGenerateOptions o;
  o.layers = d.layers.value_or(0);
  o.force = a.force;
  DSparkConfig c = generate_dspark_checkpoint(a.target, a.out, a.seed, o);
  std::printf("wrote %s: DSpark drafter for %s, seed %llu, %lld layers, %lld heads, hidden %lld, capture layers",
              a.out.c_str(), a.target.c_str(), static_cast<unsigned long long>(a.seed),
              static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.num_attention_heads),
              static_cast<long long>(c.hidden_size));
  for (int64_t id : c.target_layer_ids) std::printf(" %lld", static_cast<long long>(id));
  std::printf("\n  the weights are random: this drafter has DSpark's architecture and file layout, not its knowledge\n");
  return 0;
}

// A small Qwen3 dense checkpoint with tokenizer.json: a draft model for raw
// completions (--draft model:DIR). Only --hidden, --layers, --vocab and
// --intermediate apply.
int run_qwen3(const MakeModelArgs& a) {
  const K3DimOverrides& d = a.dims;
  if (d.experts || d.top_k || d.latent || d.moe_intermediate)
    fail("make-model --arch qwen3: a dense model has no experts; only --hidden, --layers, --vocab, --intermediate apply");
  Qwen3GenerateOptions o;
  o.out_dir = a.out;
  o.seed = a.seed;
  o.hidden = d.hidden.value_or(o.hidden);
  o.layers = d.layers.value_or(o.layers);
  o.vocab = d.vocab.value_or(o.vocab);
  o.intermediate = d.intermediate.value_or(o.intermediate);
  o.force = a.force;
  Qwen3GenerateResult r = generate_qwen3_checkpoint(o);
  std::printf("wrote %s: Qwen3 dense draft model, seed %llu, %lld layers, hidden %lld, %lld heads (%lld kv), vocab %lld\n",
              a.out.c_str(), static_cast<unsigned long long>(a.seed), static_cast<long long>(r.config.num_hidden_layers),
              static_cast<long long>(r.config.hidden_size), static_cast<long long>(r.config.num_attention_heads),
              static_cast<long long>(r.config.num_key_value_heads), static_cast<long long>(r.config.vocab_size));
  std::printf("  the weights are random: this model has Qwen3's architecture and file layout, not its knowledge\n");
  return 0;
}

// A Qwen3-MoE checkpoint in the Hugging Face layout (Qwen3MoeForCausalLM):
// the preset's dimensions with --hidden, --layers, --experts, --top-k,
// --vocab, --moe-intermediate and --intermediate (dense layers) applied.
int run_qwen3_moe(const MakeModelArgs& a) {
  const K3DimOverrides& d = a.dims;
  if (d.latent) fail("make-model --arch qwen3_moe: --latent is K3's routed-expert latent; Qwen3-MoE has none");
  if (a.preset == "k3") fail("make-model --arch qwen3_moe: --preset is tiny, small or bench");
  Qwen3MoeGenerateOptions o;
  o.out_dir = a.out;
  o.seed = a.seed;
  o.force = a.force;
  o.dims = qwen3_moe_preset(a.preset);
  o.dims.hidden = d.hidden.value_or(o.dims.hidden);
  o.dims.layers = d.layers.value_or(o.dims.layers);
  o.dims.experts = d.experts.value_or(o.dims.experts);
  o.dims.top_k = d.top_k.value_or(o.dims.top_k);
  o.dims.vocab = d.vocab.value_or(o.dims.vocab);
  o.dims.moe_intermediate = d.moe_intermediate.value_or(o.dims.moe_intermediate);
  o.dims.intermediate = d.intermediate.value_or(o.dims.intermediate);
  // About one shard per 4 GiB (--shard-mb), at least two, as released checkpoints are sharded.
  const Qwen3MoeConfig probe = [&] {
    Qwen3MoeConfig c;
    c.base.hidden_size = o.dims.hidden, c.moe_intermediate_size = o.dims.moe_intermediate;
    return c;
  }();
  const uint64_t expert_bytes = static_cast<uint64_t>(o.dims.layers) * o.dims.experts * 3 * probe.expert_tensor_bytes();
  o.shards = static_cast<int>(std::max<uint64_t>(2, expert_bytes / std::max<uint64_t>(a.shard_mb << 20, 1) + 1));
  Qwen3MoeGenerateResult r = generate_qwen3_moe_checkpoint(o);
  const Qwen3MoeConfig& c = r.config;
  std::printf("wrote %s: Qwen3-MoE preset %s, seed %llu, %lld layers (%zu MoE), %lld experts (top-%lld), hidden %lld\n",
              a.out.c_str(), a.preset.c_str(), static_cast<unsigned long long>(a.seed),
              static_cast<long long>(c.base.num_hidden_layers), c.moe_layers().size(),
              static_cast<long long>(c.num_experts), static_cast<long long>(c.num_experts_per_tok),
              static_cast<long long>(c.base.hidden_size));
  std::printf("  %zu tensors in %d shards, %s of weights (expert record %llu bytes)\n", r.tensors, o.shards,
              human_bytes(static_cast<double>(r.payload_bytes)).c_str(),
              static_cast<unsigned long long>(c.expert_record_bytes()));
  std::printf("  the weights are random: this checkpoint has Qwen3-MoE's architecture and file layout, not its knowledge\n");
  return 0;
}

// --arch names a family of the registry (model/registry.h); "k3" is kept
// as another name for kimi_k3.
const FamilyInfo& arch_family(const std::string& arch) {
  for (const FamilyInfo& f : model_families())
    if (arch == f.name || (arch == "k3" && f.family == Family::KimiK3)) return f;
  std::string names;
  for (const FamilyInfo& f : model_families()) names += std::string(names.empty() ? "" : ", ") + f.name;
  fail("make-model --arch ", arch, ": not a model family (", names, ", or k3 for kimi_k3)");
}

int run(const MakeModelArgs& a) {
  const Family family = arch_family(a.arch).family;
  if (family == Family::K3DSpark) return run_dspark(a);
  if (!a.target.empty()) fail("make-model: --target applies only to --arch k3_dspark");
  if (family == Family::Qwen3Dense) return run_qwen3(a);
  if (family == Family::Qwen3Moe) return run_qwen3_moe(a);
  GenerateOptions o;
  o.out_dir = a.out;
  o.seed = a.seed;
  o.dims = apply_overrides(preset_dims(a.preset), a.dims);
  o.shard_bytes = a.shard_mb << 20;
  o.force = a.force;
  o.progress = !a.quiet;
  GenerateResult r = generate_k3_checkpoint(o);
  const K3Config& c = r.config;
  std::printf("wrote %s: preset %s, seed %llu, %d layers, %lld experts (top-%lld), hidden %lld\n", a.out.c_str(),
              a.preset.c_str(), static_cast<unsigned long long>(a.seed), static_cast<int>(c.num_hidden_layers),
              static_cast<long long>(c.num_experts), static_cast<long long>(c.num_experts_per_token),
              static_cast<long long>(c.hidden_size));
  std::printf("  %zu tensors in %d shards, %s of weights (expert record %llu bytes), %.2f s\n", r.tensors, r.shards,
              human_bytes(static_cast<double>(r.payload_bytes)).c_str(),
              static_cast<unsigned long long>(k3_expert_record_bytes(c)), r.seconds);
  std::printf("  the weights are random: this checkpoint has the K3 architecture and file layout, not its knowledge\n");
  return 0;
}
}  // namespace

Command add_make_model(CLI::App& app) {
  auto a = std::make_shared<MakeModelArgs>();  // owned by the returned run closure
  CLI::App* sub = app.add_subcommand("make-model", "Generate a small checkpoint of a supported architecture (random weights)");
  sub->add_option("--out", a->out, "Output directory")->required();
  sub->add_option("--seed", a->seed, "Random seed")->capture_default_str();
  std::string archs;
  for (const FamilyInfo& f : model_families()) archs += std::string(archs.empty() ? "" : "; ") + f.name + ": " + f.what;
  sub->add_option("--arch", a->arch,
                  "The model family (" + archs + "; k3 is kimi_k3). k3_dspark needs --target, the K3 checkpoint it drafts for")
      ->capture_default_str();
  sub->add_option("--target", a->target, "k3_dspark: the K3 checkpoint directory the drafter is made for");
  sub->add_option("--preset", a->preset, "tiny (tests), small (a few hundred MB), bench (real K3 expert size; qwen3_moe: Qwen3-235B-A22B's), k3")
      ->check(CLI::IsMember({"tiny", "small", "bench", "k3"}))
      ->capture_default_str();
  optional_flag(sub, "--hidden", a->dims.hidden, "hidden_size");
  optional_flag(sub, "--layers", a->dims.layers, "num_hidden_layers (k3: MLA every 4th and last; k3_dspark: 1..5)");
  optional_flag(sub, "--experts", a->dims.experts, "num_experts per MoE layer");
  optional_flag(sub, "--top-k", a->dims.top_k, "num_experts_per_token");
  optional_flag(sub, "--vocab", a->dims.vocab, "vocab_size (BPE ranks + 256 reserved)");
  optional_flag(sub, "--latent", a->dims.latent, "routed_expert_hidden_size (multiple of 32)");
  optional_flag(sub, "--moe-intermediate", a->dims.moe_intermediate, "moe_intermediate_size (multiple of 32)");
  optional_flag(sub, "--intermediate", a->dims.intermediate, "intermediate_size of the dense layer 0");
  sub->add_option("--shard-mb", a->shard_mb, "Target shard size in MiB (at least two shards)")->capture_default_str();
  sub->add_flag("--force", a->force, "Overwrite an existing checkpoint in --out");
  sub->add_flag("--quiet", a->quiet, "No progress line");
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
