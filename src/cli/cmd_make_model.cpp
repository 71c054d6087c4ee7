// deltafin make-model: a small checkpoint of any family in the registry, in
// that family's real Hugging Face layout with random weights (the family's
// maker, reached through model/registry.h, writes it).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/registry.h"
#include "util/error.h"

namespace deltafin::cli {

namespace {
struct MakeModelArgs {
  std::string arch = "k3";
  uint64_t shard_mb = 4096;
  bool quiet = false;
  MakeCheckpointRequest request;
};

template <typename T>
void optional_flag(CLI::App* sub, const std::string& name, std::optional<T>& target, const std::string& help) {
  sub->add_option_function<T>(name, [&target](const T& v) { target = v; }, help);
}

int run(MakeModelArgs a) {
  a.request.shard_bytes = a.shard_mb << 20;
  a.request.progress = !a.quiet;
  std::fputs(make_family_checkpoint(family_by_arch(a.arch), a.request).c_str(), stdout);
  return 0;
}
}  // namespace

Command add_make_model(CLI::App& app) {
  auto a = std::make_shared<MakeModelArgs>();  // owned by the returned run closure
  CLI::App* sub = app.add_subcommand("make-model", "Generate a small checkpoint of a supported architecture (random weights)");
  sub->add_option("--out", a->request.out, "Output directory")->required();
  sub->add_option("--seed", a->request.seed, "Random seed")->capture_default_str();
  std::string archs;
  for (const FamilyInfo& f : model_families()) archs += std::string(archs.empty() ? "" : "; ") + f.name + ": " + f.what;
  sub->add_option("--arch", a->arch,
                  "The model family (" + archs + "; k3 is kimi_k3). k3_dspark needs --target, the K3 checkpoint it drafts for")
      ->capture_default_str();
  sub->add_option("--target", a->request.target, "k3_dspark: the K3 checkpoint directory the drafter is made for");
  sub->add_option("--preset", a->request.preset, "tiny (tests), small (a few hundred MB), bench (real K3 expert size; qwen3_moe: Qwen3-235B-A22B's), k3")
      ->check(CLI::IsMember({"tiny", "small", "bench", "k3"}))
      ->capture_default_str();
  optional_flag(sub, "--hidden", a->request.dims.hidden, "hidden_size");
  optional_flag(sub, "--layers", a->request.dims.layers, "num_hidden_layers (k3: MLA every 4th and last; k3_dspark: 1..5)");
  optional_flag(sub, "--experts", a->request.dims.experts, "num_experts per MoE layer");
  optional_flag(sub, "--top-k", a->request.dims.top_k, "num_experts_per_token");
  optional_flag(sub, "--vocab", a->request.dims.vocab, "vocab_size (BPE ranks + 256 reserved)");
  optional_flag(sub, "--latent", a->request.dims.latent, "routed_expert_hidden_size (multiple of 32)");
  optional_flag(sub, "--moe-intermediate", a->request.dims.moe_intermediate, "moe_intermediate_size (multiple of 32)");
  optional_flag(sub, "--intermediate", a->request.dims.intermediate, "intermediate_size of the dense layer 0");
  sub->add_option("--shard-mb", a->shard_mb, "Target shard size in MiB (at least two shards)")->capture_default_str();
  sub->add_option_function<std::string>(
      "--script",
      [a](const std::string& text) {
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(text);
        } catch (const nlohmann::json::exception& e) {
          fail("--script: not valid JSON: ", e.what());
        }
        if (!j.is_array() || j.empty()) fail("--script: expected a non-empty JSON array of token spellings");
        for (const nlohmann::json& t : j) {
          if (!t.is_string() || t.get_ref<const std::string&>().empty()) fail("--script: every entry must be a non-empty string");
          a->request.script.push_back(t.get<std::string>());
        }
      },
      "qwen3_moe: a JSON array of token spellings the model then writes after the generation prompt "
      "(added tokens such as <tool_call> or <|im_end|>, or any text, which becomes a token); for testing clients");
  sub->add_flag("--force", a->request.force, "Overwrite an existing checkpoint in --out");
  sub->add_flag("--quiet", a->quiet, "No progress line");
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
