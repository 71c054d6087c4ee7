// The one place that knows which model families exist and how to tell them
// apart: a checkpoint's config.json names its family by `model_type` (and
// `architectures`), and every command (inspect, setup, doctor, run, logits,
// serve, bench, make-model) asks here instead of guessing. Adding a family
// means a folder under src/model and one entry in this table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "format/byte_source.h"
#include "model/common/make_checkpoint.h"

namespace deltafin {

enum class Family { KimiK3, Qwen3Moe, Qwen3Dense, K3DSpark, DeepseekV3 };

class FamilyCheckpoint;
struct RecordPart;

// One row per family: how it is recognised and what it provides to the
// commands below the engine (a null function: the family has no such thing,
// e.g. a draft model has no routed experts to store). The loaders table
// (model/loaders/family_loaders.cpp) adds how the engine loads a target.
struct FamilyInfo {
  Family family;
  const char* name;          // the --arch and store manifest name
  const char* model_type;    // config.json's model_type
  const char* architecture;  // config.json's architectures[0] ("" when the family's configs omit it)
  const char* what;          // one line for help texts and errors
  bool target;               // a model deltafin runs as the target (not only as a draft model)
  std::string (*make_checkpoint)(const MakeCheckpointRequest&);
  std::unique_ptr<FamilyCheckpoint> (*open_checkpoint)(const std::string& dir, const ShardOpener* opener);
  void (*describe)(const std::string& dir, bool verify_experts);
  std::vector<RecordPart> (*record_layout)(const std::string& config_path);
  // A second model_type the same architecture ships under (Kimi K2's
  // "kimi_k2" for DeepseekV3ForCausalLM); null when there is none.
  const char* other_model_type = nullptr;
};

const std::vector<FamilyInfo>& model_families();
const FamilyInfo& family_info(Family family);

// The family a config.json describes; an error naming the file, its
// model_type and architectures, and the families known, when none matches.
const FamilyInfo& detect_family(const nlohmann::json& config, const std::string& source);
// Reads <dir>/config.json (a checkpoint directory) and detects its family.
const FamilyInfo& detect_checkpoint_family(const std::string& dir);

// Opens a target family's checkpoint for `deltafin setup` (its family from
// config.json); with `opener`, its shards are opened through it (a mirror's,
// for setup --stream) and only config.json and the index are read from `dir`.
std::unique_ptr<FamilyCheckpoint> open_family_checkpoint(const std::string& dir, const ShardOpener* opener = nullptr);

// `deltafin inspect`: validates the checkpoint in `dir` and prints its
// family's description (with `verify_experts`, every expert record checked).
void describe_checkpoint(const std::string& dir, bool verify_experts);

class FamilyTokenizer;
// The tokenizer in `dir` alone (`deltafin tokenize`): a DeepSeek-V3-family
// directory (by its config.json) has that family's tokenizer and chat; else
// a directory holding tokenizer.json and no tiktoken.model is a Hugging Face
// tokenizer (with Qwen3's chat format); otherwise K3's tiktoken.model.
std::unique_ptr<FamilyTokenizer> open_family_tokenizer(const std::string& dir);

// The expert record layout the config.json in `dir` implies (a store's copy
// of it, say): what stores before manifest version 4 did not record.
std::vector<RecordPart> record_layout_of(const std::string& dir);

// `make-model --arch NAME`: a family by its registry name ("k3" is kept
// as another name for kimi_k3); an error listing the names otherwise.
const FamilyInfo& family_by_arch(const std::string& arch);
// Writes a small checkpoint of `family` in its real Hugging Face layout with
// random weights (the family's maker checks which options apply); returns
// the lines `make-model` prints.
std::string make_family_checkpoint(const FamilyInfo& family, const MakeCheckpointRequest& request);

}  // namespace deltafin
