#include "model/kimi_k3/checkpoint.h"

#include <filesystem>
#include <map>

#include "model/kimi_k3/tensors.h"
#include "model/kimi_k3/pinned.h"
#include "format/tiktoken_file.h"
#include "util/error.h"

namespace deltafin {

namespace fs = std::filesystem;

namespace {

std::string shape_text(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += cat(i ? ", " : "", s[i]);
  return out + "]";
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// r_f is not a config field: take it from the first KDA layer's f_a_proj.
int64_t find_kda_gate_rank(const Checkpoint& ckpt, const K3Config& c) {
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.layer_kinds[static_cast<size_t>(i)] != LayerKind::KDA) continue;
    TensorRef t = ckpt.find(k3_layer_tensor(i, "self_attn.f_a_proj.weight"));
    if (t && t.info->shape.size() == 2 && t.info->shape[0] > 0) return static_cast<int64_t>(t.info->shape[0]);
    break;  // missing or malformed: the binder reports it against K
  }
  return c.kda_head_dim;
}

}  // namespace

std::string BindReport::describe(size_t max_per_list) const {
  std::string out;
  auto list = [&](const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    out += cat("\n  ", items.size(), " ", title, ":");
    for (size_t i = 0; i < items.size() && i < max_per_list; ++i) out += "\n    " + items[i];
    if (items.size() > max_per_list) out += cat("\n    ... and ", items.size() - max_per_list, " more");
  };
  list("missing tensors", missing);
  list("tensors with the wrong dtype or shape", wrong);
  list("unexpected tensors", unexpected);
  return out;
}

BindReport bind_k3_tensors(const Checkpoint& ckpt, const K3Config& config, int64_t rf) {
  BindReport r;
  std::map<std::string, const TensorSpec*> expected;
  std::vector<TensorSpec> specs = k3_language_tensors(config, rf);
  for (const TensorSpec& s : specs) {
    expected.emplace(s.name, &s);
    TensorRef t = ckpt.find(s.name);
    if (!t) {
      r.missing.push_back(s.name);
      continue;
    }
    if (t.info->dtype != s.dtype || t.info->shape != s.shape)
      r.wrong.push_back(cat(s.name, ": found ", dtype_name(t.info->dtype), " ", shape_text(t.info->shape),
                            ", expected ", dtype_name(s.dtype), " ", shape_text(s.shape)));
  }
  for (const std::string& name : ckpt.names()) {
    if (expected.count(name)) continue;
    if (starts_with(name, "vision_tower.") || starts_with(name, "mm_projector."))
      ++r.ignored;
    else
      r.unexpected.push_back(name);
  }
  return r;
}

TensorRef K3Checkpoint::tensor(const std::string& name) const {
  TensorRef t = tensors.find(name);
  if (!t) fail(dir, ": tensor '", name, "' not found");
  return t;
}

void K3Checkpoint::read_expert_record_into(int64_t layer, int64_t expert, uint8_t* out) const {
  if (layer < 1 || layer >= config.num_hidden_layers || expert < 0 || expert >= config.num_experts)
    fail(dir, ": no routed expert (layer ", layer, ", expert ", expert, ")");
  uint64_t off = 0;
  for (const TensorSpec& s : k3_expert_tensors(config, layer, expert)) {
    TensorRef t = tensor(s.name);
    t.shard->read(*t.info, out + off);
    off += t.info->bytes();
  }
}

std::vector<uint8_t> K3Checkpoint::read_expert_record(int64_t layer, int64_t expert) const {
  std::vector<uint8_t> record(k3_expert_record_bytes(config));
  read_expert_record_into(layer, expert, record.data());
  return record;
}

namespace {
// The config is read before the shards are opened, so a config error is
// reported first (and, for a mirror, before any shard is fetched).
K3Config read_config(const std::string& dir) { return load_k3_config((fs::path(dir) / "config.json").string()); }

K3Checkpoint bind_k3(const std::string& dir, K3Config config, Checkpoint tensors) {
  K3Checkpoint k;
  k.dir = dir;
  k.config = std::move(config);
  k.tensors = std::move(tensors);
  k.kda_gate_rank = find_kda_gate_rank(k.tensors, k.config);
  BindReport report = bind_k3_tensors(k.tensors, k.config, k.kda_gate_rank);
  if (!report.ok()) fail(dir, ": checkpoint does not match the K3 architecture of its config.json:", report.describe());
  k.ignored_tensors = report.ignored;
  k.pinned_revision = matches_pinned_k3(dir);
  const std::string ranks_path = (fs::path(dir) / "tiktoken.model").string();
  if (fs::exists(ranks_path)) {
    const int64_t ranks = static_cast<int64_t>(read_tiktoken_file(ranks_path).size());
    if (k.config.vocab_size != ranks + 256)
      fail(dir, "/config.json: field text_config.vocab_size = ", k.config.vocab_size, ", but ", ranks_path, " has ",
           ranks, " ranks; expected ranks + 256 = ", ranks + 256);
  }
  return k;
}
}  // namespace

K3Checkpoint load_k3_checkpoint(const std::string& dir) {
  K3Config config = read_config(dir);
  return bind_k3(dir, std::move(config), Checkpoint::open(dir));
}

K3Checkpoint load_k3_checkpoint(const std::string& dir, const ShardOpener& opener) {
  K3Config config = read_config(dir);
  return bind_k3(dir, std::move(config), Checkpoint::open_remote(dir, opener));
}

}  // namespace deltafin
