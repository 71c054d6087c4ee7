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
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

using nlohmann::json;

const std::vector<FamilyInfo>& model_families() {
  static const std::vector<FamilyInfo> families = {
      {Family::KimiK3, "kimi_k3", "kimi_k3", "", "Kimi K3 architecture (KDA + MLA, MXFP4 latent MoE)", true},
      {Family::Qwen3Moe, "qwen3_moe", "qwen3_moe", "Qwen3MoeForCausalLM", "Qwen3-MoE (GQA, BF16 experts)", true},
      {Family::Qwen3Dense, "qwen3", "qwen3", "Qwen3ForCausalLM", "Qwen3 dense (a draft model)", false},
      {Family::K3DSpark, "k3_dspark", "k3_dspark", "K3DSparkModel", "K3's DSpark drafter", false},
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
    if (model_type != f.model_type) continue;
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
  switch (f.family) {
    case Family::KimiK3:
      return opener ? std::make_unique<K3FamilyCheckpoint>(dir, *opener) : std::make_unique<K3FamilyCheckpoint>(dir);
    case Family::Qwen3Moe:
      return opener ? std::make_unique<Qwen3MoeFamilyCheckpoint>(dir, *opener)
                    : std::make_unique<Qwen3MoeFamilyCheckpoint>(dir);
    default: fail(dir, ": a ", f.what, " checkpoint has no routed experts to store; setup takes a target model");
  }
}

void describe_checkpoint(const std::string& dir, bool verify_experts) {
  const FamilyInfo& f = detect_checkpoint_family(dir);
  switch (f.family) {
    case Family::KimiK3: return describe_k3_checkpoint(dir, verify_experts);
    case Family::Qwen3Moe: return describe_qwen3_moe_checkpoint(dir, verify_experts);
    default: fail(dir, ": a ", f.what, " checkpoint; inspect describes target models (kimi_k3, qwen3_moe)");
  }
}

std::unique_ptr<FamilyTokenizer> open_family_tokenizer(const std::string& dir) {
  const std::filesystem::path d(dir);
  if (std::filesystem::exists(d / "tokenizer.json") && !std::filesystem::exists(d / "tiktoken.model"))
    return std::make_unique<Qwen3FamilyTokenizer>((d / "tokenizer.json").string());
  return std::make_unique<K3FamilyTokenizer>(dir);
}

std::vector<RecordPart> record_layout_of(const std::string& dir) {
  const FamilyInfo& f = detect_checkpoint_family(dir);
  const std::string config = (std::filesystem::path(dir) / "config.json").string();
  switch (f.family) {
    case Family::KimiK3: return k3_record_layout(load_k3_config(config));
    case Family::Qwen3Moe: return qwen3_moe_record_layout(read_qwen3_moe_config(config));
    default: fail(dir, ": a ", f.what, " has no routed experts");
  }
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
  if (f.family != Family::Qwen3Moe && !r.script.empty())
    fail("make-model: --script applies only to --arch qwen3_moe (a bigram table of token spellings; K3's tool markup "
         "repeats its tags, which a bigram cannot)");
  switch (f.family) {
    case Family::KimiK3: return make_k3_checkpoint(r);
    case Family::Qwen3Moe: return make_qwen3_moe_checkpoint(r);
    case Family::Qwen3Dense: return make_qwen3_checkpoint(r);
    case Family::K3DSpark: return make_dspark_checkpoint(r);
  }
  fail("make-model: no checkpoint maker for ", f.name);
}

}  // namespace deltafin
