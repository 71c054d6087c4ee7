// deltafin make-model: generate a small K3-architecture checkpoint.
#include <cstdio>

#include "cli/commands.h"
#include "format/k3_config.h"
#include "format/k3_tensors.h"
#include "model/kimi_k3/generator.h"
#include "util/progress.h"

namespace deltafin::cli {

namespace {
struct MakeModelArgs {
  std::string out, preset = "tiny";
  uint64_t seed = 1;
  uint64_t shard_mb = 4096;
  bool force = false, quiet = false;
  K3DimOverrides dims;
};

template <typename T>
void optional_flag(CLI::App* sub, const std::string& name, std::optional<T>& target, const std::string& help) {
  sub->add_option_function<T>(name, [&target](const T& v) { target = v; }, help);
}

int run(const MakeModelArgs& a) {
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
  CLI::App* sub = app.add_subcommand("make-model", "Generate a small K3-architecture checkpoint (random weights)");
  sub->add_option("--out", a->out, "Output directory")->required();
  sub->add_option("--seed", a->seed, "Random seed")->capture_default_str();
  sub->add_option("--preset", a->preset, "tiny (tests), small (a few hundred MB), bench (real K3 expert size), k3")
      ->check(CLI::IsMember({"tiny", "small", "bench", "k3"}))
      ->capture_default_str();
  optional_flag(sub, "--hidden", a->dims.hidden, "hidden_size");
  optional_flag(sub, "--layers", a->dims.layers, "num_hidden_layers (MLA every 4th and last)");
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
