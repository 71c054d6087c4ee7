#include "format/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace fs = std::filesystem;

std::string shard_file_name(int index_1based, int total, int total_digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%0*d.safetensors", index_1based, total_digits, total);
  return buf;
}

namespace {

// Shard files of the directory, checked to be a complete 1..N series. The
// total has 6 digits in K3's release (model-00001-of-000096) and 5 in
// Hugging Face's usual naming (model-00001-of-00002); one checkpoint uses one.
std::vector<std::string> find_shard_files(const std::string& dir) {
  static const std::regex pattern(R"(model-(\d{5})-of-(\d{5,6})\.safetensors)");
  std::map<int, std::string> by_index;
  int total = -1;
  std::string total_text;  // as written, so 00002 and 000002 differ
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, pattern)) continue;
    int idx = std::stoi(m[1]), tot = std::stoi(m[2]);
    if (total >= 0 && m[2].str() != total_text)
      fail(dir, ": shard files disagree on the total: ", name, " says ", m[2].str(), ", others say ", total_text);
    total = tot;
    total_text = m[2].str();
    if (idx < 1 || idx > tot) fail(dir, "/", name, ": shard index ", idx, " outside 1..", tot);
    by_index[idx] = name;
  }
  std::vector<std::string> files;
  if (total >= 0 && fs::exists(fs::path(dir) / "model.safetensors"))
    fail(dir, ": holds both model.safetensors and shard files model-NNNNN-of-", total,
         "; which one is the checkpoint is ambiguous");
  if (total < 0) {
    if (fs::exists(fs::path(dir) / "model.safetensors")) return {"model.safetensors"};
    fail(dir, ": no safetensors files (expected model.safetensors or model-00001-of-NNNNNN.safetensors ...)");
  }
  for (int i = 1; i <= total; ++i) {
    auto it = by_index.find(i);
    if (it == by_index.end())
      fail(dir, ": shard ", shard_file_name(i, total, static_cast<int>(total_text.size())), " is missing");
    files.push_back(it->second);
  }
  return files;
}

// weight_map of model.safetensors.index.json: tensor name -> shard file name.
std::map<std::string, std::string> read_index(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(path, ": expected an object with a 'weight_map' object");
  std::map<std::string, std::string> map;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) fail(path, ": weight_map['", it.key(), "'] is not a string");
    map[it.key()] = it.value().get<std::string>();
  }
  return map;
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir) {
  if (!fs::is_directory(dir)) fail(dir, ": not a directory");
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  const bool has_index = fs::exists(index_path);
  std::map<std::string, std::string> index;
  std::vector<std::string> files;
  if (has_index) {
    index = read_index(index_path);
    std::set<std::string> named;
    for (const auto& [name, file] : index) named.insert(file);
    for (const std::string& f : named) {
      if (f.find('/') != std::string::npos || f == "..")
        fail(index_path, ": weight_map names shard '", f, "' outside the checkpoint directory");
      if (!fs::exists(fs::path(dir) / f)) fail(index_path, ": weight_map names shard '", f, "' which does not exist");
    }
    // Every shard on disk belongs to the checkpoint, listed or not.
    std::vector<std::string> on_disk = find_shard_files(dir);
    named.insert(on_disk.begin(), on_disk.end());
    files.assign(named.begin(), named.end());
  } else {
    files = find_shard_files(dir);
  }
  auto local = [&](const std::string& name) -> std::unique_ptr<ByteSource> {
    return std::make_unique<LocalFileSource>((fs::path(dir) / name).string());
  };
  return assemble(dir, files, local, index_path, has_index ? &index : nullptr);
}

Checkpoint Checkpoint::open_remote(const std::string& dir, const ShardOpener& opener) {
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  if (!fs::exists(index_path)) return assemble(dir, {"model.safetensors"}, opener, index_path, nullptr);
  const std::map<std::string, std::string> index = read_index(index_path);
  std::set<std::string> named;
  for (const auto& [name, file] : index) {
    if (file.find('/') != std::string::npos || file == ".." || file.empty())
      fail(index_path, ": weight_map names shard '", file, "' outside the checkpoint directory");
    named.insert(file);
  }
  if (named.empty()) fail(index_path, ": weight_map is empty");
  return assemble(dir, std::vector<std::string>(named.begin(), named.end()), opener, index_path, &index);
}

Checkpoint Checkpoint::assemble(const std::string& dir, const std::vector<std::string>& files, const ShardOpener& opener,
                                const std::string& index_path, const std::map<std::string, std::string>* index) {
  Checkpoint c;
  c.dir_ = dir;
  for (const std::string& f : files) {
    c.shards_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(opener(f))));
    const SafetensorsFile* shard = c.shards_.back().get();
    for (const TensorInfo& t : shard->tensors()) {
      auto [it, inserted] = c.by_name_.emplace(t.name, TensorRef{shard, &t});
      if (!inserted)
        fail(dir, ": tensor '", t.name, "' appears in two shards: ", it->second.shard->path(), " and ", shard->path());
    }
  }
  if (!index) return c;
  // The index must agree with the shard headers exactly. Shards are compared
  // by file name (the part after the last '/' of a path or URL).
  auto base_name = [](const std::string& p) { return p.substr(p.find_last_of('/') + 1); };
  for (const auto& [name, file] : *index) {
    auto it = c.by_name_.find(name);
    std::string shard_name = it == c.by_name_.end() ? "" : base_name(it->second.shard->path());
    if (shard_name != file)
      fail(index_path, ": weight_map puts tensor '", name, "' in ", file, " but that shard has no such tensor",
           shard_name.empty() ? std::string() : cat(" (it is in ", shard_name, ")"));
  }
  for (const auto& [name, ref] : c.by_name_)
    if (!index->count(name))
      fail(index_path, ": tensor '", name, "' of shard ", ref.shard->path(), " is missing from weight_map");
  return c;
}

TensorRef Checkpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? TensorRef{} : it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [name, ref] : by_name_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, ref] : by_name_) n += ref.info->bytes();
  return n;
}

}  // namespace deltafin
