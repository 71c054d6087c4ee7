// deltafin make-model: a small checkpoint of any family in the registry, in
// that family's real Hugging Face layout with random weights (the family's
// maker, reached through model/registry.h, writes it).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/common/routing_profile.h"
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

// A dimension of the checkpoint (the family's maker checks what it needs
// beyond a positive size: multiples of 32, layer counts).
void dimension(CLI::App* sub, const std::string& name, std::optional<int64_t>& target, const std::string& help) {
  sub->add_option_function<int64_t>(name, [&target](const int64_t& v) { target = v; }, help)
      ->transform(whole_number(1, int64_t{1} << 20));
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
  CLI::App* sub = app.add_subcommand(
      "make-model", "Generate a checkpoint of a supported family in its real Hugging Face layout (random weights)");
  sub->footer(R"(Writes a checkpoint as the family's release does, with seeded random weights (the checkpoint has the
architecture's shape, not its knowledge), streaming in bounded memory with a progress line.
k3: config.json (root, text_config, linear_attn_config, quantization_config), two or more safetensors
shards with model.safetensors.index.json, tiktoken.model, tokenizer_config.json. Presets: tiny for unit
tests (under 5 MB), small (tens of MB), bench (K3's real 17,547,264-byte experts with few layers and
experts, set by --layers and --experts), k3 (K3's full dimensions: terabytes).
k3_dspark --target K3_DIR: a DSpark drafter for that checkpoint (config.json with every field of the
released one, scaled; model.safetensors; the target's embedding copied).
deepseek_v3 [--flavor F]: the DeepSeek-V3 family as released (DeepseekV3ForCausalLM: config.json with every
released field and quantization_config, sharded safetensors with the index, the release's tokenizer files and
chat template). Flavors: deepseek_v3 (DeepSeek V3: FP8 e4m3 Linears with F32 128x128 block scales, grouped
routing, YaRN beta 32/1, the MTP layer), deepseek_r1 (the same with R1's template), deepseek_v31 (V3.1's
template, scale_fmt ue8m0: power-of-two scales), deepseek_v3_q_proj (V3 with q_lora_rank null), kimi_k2 (Kimi
K2-Instruct: FP8, n_group 1, YaRN beta 1/1, no MTP), kimi_k2_thinking (INT4 routed experts, compressed-tensors
pack-quantized group 32, the rest BF16). --preset bench has DeepSeek V3's real expert (44,050,944 bytes FP8 with scales; K2-Thinking's INT4
expert 24,772,656 bytes) with 4 layers of 16 experts; the dimension options apply.
qwen3: a small Qwen3 dense draft model with tokenizer.json (--hidden, --layers, --vocab, --intermediate).
qwen3_moe: a Qwen3-MoE checkpoint (Qwen3MoeForCausalLM: config.json with every released field, sharded
BF16 safetensors with the index, tokenizer.json); --preset bench has Qwen3-235B-A22B's expert (37,748,736
bytes) and attention shape; the dimension options apply. --script (qwen3_moe) takes a JSON array of
token spellings, e.g. '["<tool_call>", "{\"name\": \"now\", \"arguments\": {}}", "</tool_call>",
"<|im_end|>"]': the checkpoint's greedy answer to any chat is then exactly those tokens (the layers add
nothing and the embeddings and lm_head form a bigram table; text that is not a token becomes an added
token; each token may appear once), for testing a client or agent against known output.)");
  sub->add_option("--out", a->request.out, "Output directory")->required();
  sub->add_option("--seed", a->request.seed, "Random seed")->transform(whole_number(0))->capture_default_str();
  std::string archs;
  for (const FamilyInfo& f : model_families()) archs += std::string(archs.empty() ? "" : "; ") + f.name + ": " + f.what;
  sub->add_option("--arch", a->arch,
                  "The model family: " + archs + "; k3 is another name for kimi_k3. k3_dspark needs --target, the K3 "
                  "checkpoint it drafts for")
      ->capture_default_str();
  sub->add_option("--flavor", a->request.flavor,
                  "deepseek_v3: the release whose layout, tokenizer and template are written (deepseek_v3, "
                  "deepseek_r1, deepseek_v31, deepseek_v3_q_proj, kimi_k2, kimi_k2_thinking; default deepseek_v3)")
      ->check(one_of({"deepseek_v3", "deepseek_r1", "deepseek_v31", "deepseek_v3_q_proj", "kimi_k2", "kimi_k2_thinking"}));
  sub->add_option("--target", a->request.target, "k3_dspark: the K3 checkpoint directory the drafter is made for");
  sub->add_option("--preset", a->request.preset, "tiny for tests, small (tens of MB), bench (K3's real expert size; qwen3_moe: Qwen3-235B-A22B's; deepseek_v3: DeepSeek V3's and K2-Thinking's), or k3, K3's full dimensions")
      ->check(one_of({"tiny", "small", "bench", "k3"}))
      ->capture_default_str();
  dimension(sub, "--hidden", a->request.dims.hidden, "hidden_size");
  dimension(sub, "--layers", a->request.dims.layers, "num_hidden_layers; k3: MLA every 4th and the last; k3_dspark: 1 to 5");
  dimension(sub, "--experts", a->request.dims.experts, "num_experts per MoE layer");
  dimension(sub, "--top-k", a->request.dims.top_k, "num_experts_per_token");
  dimension(sub, "--vocab", a->request.dims.vocab, "vocab_size: BPE ranks + 256 reserved");
  dimension(sub, "--latent", a->request.dims.latent, "routed_expert_hidden_size, a multiple of 32");
  dimension(sub, "--moe-intermediate", a->request.dims.moe_intermediate, "moe_intermediate_size, a multiple of 32");
  dimension(sub, "--intermediate", a->request.dims.intermediate, "intermediate_size of the dense layer 0");
  sub->add_option("--shard-mb", a->shard_mb, "Target shard size in MiB; there are at least two shards")
      ->transform(whole_number(1, int64_t{1} << 20))
      ->capture_default_str();
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
  std::string profiles;
  for (const RoutingProfile& p : routing_profiles())
    profiles += std::string(profiles.empty() ? ": " : "; ") + p.name + (p.name == "uniform" ? " (the default)" : "") +
                ", " + p.what;
  sub->add_option(
         "--routing-profile", a->request.routing_profile,
         "k3 and qwen3_moe: a benchmark model with controlled routing (a target expert popularity per MoE layer and a "
         "temporal locality; not a trained model). Changed, and nothing else: each MoE layer's router row e is "
         "multiplied by a fitted s_e >= 0 (which experts are hot: a seeded permutation per layer), K3's "
         "e_score_correction_bias is zero, and for locality attention weights are scaled by the profile's gains "
         "(self_attn.o_proj.weight; K3: the MLA's q_b_proj and g_proj, so its attention is nearly uniform and its "
         "output close to a running mean, slowly varying from token to token); config.json's "
         "\"deltafin_routing_profile\" records the profile, every factor and every layer's s. Profiles" +
             profiles +
             ". Their measured coverage, locality and hit rates: bench/results/2026-12-04-routing-profiles.md")
      ->check(CLI::Validator(
          [](std::string& name) {
            try {
              routing_profile(name);
              return std::string();
            } catch (const Error& e) {
              const std::string m = e.what(), prefix = "--routing-profile: ";  // CLI11 names the option itself
              return m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m;  // names the valid profiles
            }
          },
          "PROFILE"))
      ->capture_default_str();
  sub->add_flag("--force", a->request.force, "Overwrite an existing checkpoint in --out");
  sub->add_flag("--quiet", a->quiet, "No progress line");
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
