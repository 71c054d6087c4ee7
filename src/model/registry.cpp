#include "model/registry.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/k3_dspark/generator.h"
#include "model/kimi_k3/describe.h"
#include "model/kimi_k3/generator.h"
#include "model/qwen3/qwen3_generator.h"
#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "model/kimi_k3/family_checkpoint.h"
#include "model/qwen3/qwen3_chat.h"
#include "model/qwen3_moe/describe.h"
#include "model/kimi_k3/chat_format.h"
#include "model/qwen3_moe/family_checkpoint.h"
#include "model/deepseek_v3/chat_format.h"
#include "model/deepseek_v3/family_checkpoint.h"
#include "model/deepseek_v3/make_checkpoint.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

using nlohmann::json;

namespace {

template <typename Checkpoint>
std::unique_ptr<FamilyCheckpoint> open_checkpoint(const std::string& dir, const ShardOpener* opener) {
  return opener ? std::make_unique<Checkpoint>(dir, *opener) : std::make_unique<Checkpoint>(dir);
}
std::vector<RecordPart> k3_layout(const std::string& config) { return k3_record_layout(load_k3_config(config)); }
std::vector<RecordPart> deepseek_v3_layout(const std::string& config) {
  return deepseek_v3_record_layout(read_deepseek_v3_config(config));
}
std::vector<RecordPart> qwen3_moe_layout(const std::string& config) {
  return qwen3_moe_record_layout(read_qwen3_moe_config(config));
}

}  // namespace

const std::vector<FamilyInfo>& model_families() {
  static const std::vector<FamilyInfo> families = {
      {Family::KimiK3, "kimi_k3", "kimi_k3", "", "Kimi K3 architecture (KDA + MLA, MXFP4 latent MoE)", true,
       make_k3_checkpoint, open_checkpoint<K3FamilyCheckpoint>, describe_k3_checkpoint, k3_layout},
      {Family::Qwen3Moe, "qwen3_moe", "qwen3_moe", "Qwen3MoeForCausalLM", "Qwen3-MoE (GQA, BF16 experts)", true,
       make_qwen3_moe_checkpoint, open_checkpoint<Qwen3MoeFamilyCheckpoint>, describe_qwen3_moe_checkpoint,
       qwen3_moe_layout},
      {Family::DeepseekV3, "deepseek_v3", "deepseek_v3", "DeepseekV3ForCausalLM",
       "DeepSeek-V3 family (DeepSeek V3/R1/V3.1, Kimi K2: MLA + YaRN, FP8/INT4 experts)", true,
       make_deepseek_v3_checkpoint, open_checkpoint<DeepseekV3FamilyCheckpoint>, nullptr, deepseek_v3_layout, "kimi_k2"},
      {Family::Qwen3Dense, "qwen3", "qwen3", "Qwen3ForCausalLM", "Qwen3 dense (a draft model)", false,
       make_qwen3_checkpoint, nullptr, nullptr, nullptr},
      {Family::K3DSpark, "k3_dspark", "k3_dspark", "K3DSparkModel", "K3's DSpark drafter", false,
       make_dspark_checkpoint, nullptr, nullptr, nullptr},
  };
  return families;
}

const FamilyInfo& family_info(Family family) {
  for (const FamilyInfo& f : model_families())
    if (f.family == family) return f;
  fail("unknown model family");
}

const FamilyInfo& detect_family(const json& config, const std::string& source) {
  if (!config.is_object()) fail(source, ": the root is not a JSON object");
  const std::string model_type =
      config.contains("model_type") && config["model_type"].is_string() ? config["model_type"].get<std::string>() : "";
  for (const FamilyInfo& f : model_families()) {
    if (model_type != f.model_type && !(f.other_model_type && model_type == f.other_model_type)) continue;
    // When the file names its architecture it must be the family's: a
    // model_type shared with a different head (e.g. a classifier) is refused.
    if (*f.architecture && config.contains("architectures") && !config["architectures"].is_null()) {
      const json& a = config["architectures"];
      if (!a.is_array() || a.size() != 1 || a[0] != f.architecture)
        fail(source, ": model_type \"", model_type, "\" with architectures ", a.dump(), "; deltafin runs ",
             f.architecture, " only");
    }
    return f;
  }
  std::string known;
  for (const FamilyInfo& f : model_families()) known += cat(known.empty() ? "" : ", ", f.model_type);
  fail(source, ": model_type ", config.contains("model_type") ? config["model_type"].dump() : "(missing)",
       config.contains("architectures") ? cat(" (architectures ", config["architectures"].dump(), ")") : "",
       " is not a model family deltafin knows (", known, ")");
}

const FamilyInfo& detect_checkpoint_family(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  if (!std::filesystem::exists(path)) fail(dir, ": no config.json (not a Hugging Face checkpoint directory)");
  json j;
  try {
    j = json::parse(read_text_file(path));
  } catch (const json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
  return detect_family(j, path);
}

std::unique_ptr<FamilyCheckpoint> open_family_checkpoint(const std::string& dir, const ShardOpener* opener) {
  const FamilyInfo& f = detect_checkpoint_family(dir);
  if (!f.open_checkpoint)
    fail(dir, ": a ", f.what, " checkpoint has no routed experts to store; setup takes a target model");
  return f.open_checkpoint(dir, opener);
}

void describe_checkpoint(const std::string& dir, bool verify_experts) {
  const FamilyInfo& f = detect_checkpoint_family(dir);
  if (!f.describe) fail(dir, ": a ", f.what, " checkpoint; inspect describes target models (kimi_k3, qwen3_moe)");
  f.describe(dir, verify_experts);
}

std::unique_ptr<FamilyTokenizer> open_family_tokenizer(const std::string& dir) {
  const std::filesystem::path d(dir);
  // A DeepSeek-V3-family checkpoint or store (its config.json says so):
  // DeepSeek's tokenizer.json or Kimi K2's tiktoken.model, with its chat.
  if (std::filesystem::exists(d / "config.json") && &detect_checkpoint_family(dir) == &family_info(Family::DeepseekV3))
    return std::make_unique<DeepSeekV3FamilyTokenizer>(dir);
  if (std::filesystem::exists(d / "tokenizer.json") && !std::filesystem::exists(d / "tiktoken.model"))
    return std::make_unique<Qwen3FamilyTokenizer>((d / "tokenizer.json").string());
  return std::make_unique<K3FamilyTokenizer>(dir);
}

std::vector<RecordPart> record_layout_of(const std::string& dir) {
  const FamilyInfo& f = detect_checkpoint_family(dir);
  if (!f.record_layout) fail(dir, ": a ", f.what, " has no routed experts");
  return f.record_layout((std::filesystem::path(dir) / "config.json").string());
}

const FamilyInfo& family_by_arch(const std::string& arch) {
  for (const FamilyInfo& f : model_families())
    if (arch == f.name || (arch == "k3" && f.family == Family::KimiK3)) return f;
  std::string names;
  for (const FamilyInfo& f : model_families()) names += cat(names.empty() ? "" : ", ", f.name);
  fail("make-model --arch ", arch, ": not a model family (", names, ", or k3 for kimi_k3)");
}

std::string make_family_checkpoint(const FamilyInfo& f, const MakeCheckpointRequest& r) {
  if (f.family != Family::K3DSpark && !r.target.empty()) fail("make-model: --target applies only to --arch k3_dspark");
  if (f.family != Family::DeepseekV3 && !r.flavor.empty())
    fail("make-model: --flavor applies only to --arch deepseek_v3 (the release whose layout it writes)");
  if (f.family != Family::Qwen3Moe && !r.script.empty())
    fail("make-model: --script applies only to --arch qwen3_moe (a bigram table of token spellings; K3's tool markup "
         "repeats its tags, which a bigram cannot)");
  if (f.family != Family::KimiK3 && f.family != Family::Qwen3Moe && r.routing_profile != "uniform")
    fail("make-model: --routing-profile applies only to --arch k3 (kimi_k3) and qwen3_moe");
  if (f.make_checkpoint) return f.make_checkpoint(r);
  fail("make-model: no checkpoint maker for ", f.name);
}

}  // namespace deltafin
