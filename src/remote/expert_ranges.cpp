#include "remote/expert_ranges.h"

#include <cstring>
#include <filesystem>
#include <map>

#include "format/k3_tensors.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/file.h"
#include "util/numeric.h"

namespace deltafin {

namespace {

constexpr char kMagic[8] = {'D', 'F', 'X', 'R', '0', '0', '0', '1'};
constexpr size_t kHeaderBytes = 8 + 3 * 8;
constexpr size_t kRangeBytes = 4 + 8 + 8;

uint32_t load_u32le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
void store_u32le(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

std::string ExpertRanges::path(const std::string& store_dir) { return store_dir + "/remote/experts.bin"; }

size_t ExpertRanges::index(int64_t layer, int64_t expert) const {
  if (layer < 1 || layer >= layers_ || expert < 0 || expert >= experts_)
    fail("remote expert ranges: no routed expert (layer ", layer, ", expert ", expert, ")");
  return static_cast<size_t>(((layer - 1) * experts_ + expert)) * kTensorsPerExpert;
}

ExpertRanges ExpertRanges::from_checkpoint(const K3Checkpoint& k, const std::vector<RemoteFile>& shards) {
  std::map<std::string, uint32_t> shard_of;
  for (size_t i = 0; i < shards.size(); ++i) shard_of[shards[i].name] = static_cast<uint32_t>(i);
  ExpertRanges r;
  r.layers_ = k.config.num_hidden_layers;
  r.experts_ = k.config.num_experts;
  r.shards_ = shards.size();
  r.ranges_.reserve(static_cast<size_t>((r.layers_ - 1) * r.experts_) * kTensorsPerExpert);
  for (int64_t l = 1; l < r.layers_; ++l) {
    if (!k.config.is_moe_layer(l)) fail(k.dir, ": layer ", l, " is not a MoE layer; stores expect layers 1.. to be MoE");
    for (int64_t e = 0; e < r.experts_; ++e)
      for (const TensorSpec& s : k3_expert_tensors(k.config, l, e)) {
        const TensorRef t = k.tensor(s.name);
        const std::string& shard_path = t.shard->path();
        const std::string shard_name = shard_path.substr(shard_path.find_last_of('/') + 1);
        auto it = shard_of.find(shard_name);
        if (it == shard_of.end()) fail(shard_path, ": shard is not among the mirror's files of this store");
        r.ranges_.push_back({it->second, t.info->file_offset, t.info->bytes()});
      }
  }
  return r;
}

void ExpertRanges::save(const std::string& store_dir) const {
  std::string bytes(kHeaderBytes + ranges_.size() * kRangeBytes + 4, '\0');
  uint8_t* p = reinterpret_cast<uint8_t*>(bytes.data());
  std::memcpy(p, kMagic, 8);
  store_u64le(p + 8, static_cast<uint64_t>(layers_));
  store_u64le(p + 16, static_cast<uint64_t>(experts_));
  store_u64le(p + 24, shards_);
  uint8_t* q = p + kHeaderBytes;
  for (const TensorRange& t : ranges_) {
    store_u32le(q, t.shard);
    store_u64le(q + 4, t.offset);
    store_u64le(q + 12, t.bytes);
    q += kRangeBytes;
  }
  store_u32le(q, crc32c(p, static_cast<size_t>(q - p)));
  std::filesystem::create_directories(store_dir + "/remote");
  write_file_atomic(path(store_dir), bytes);
}

ExpertRanges ExpertRanges::load(const std::string& store_dir, const StoreManifest& m) {
  const std::string file = path(store_dir);
  if (!m.remote) fail(file, ": the store has no remote section");
  const std::string bytes = read_text_file(file);
  const uint8_t* p = reinterpret_cast<const uint8_t*>(bytes.data());
  ExpertRanges r;
  r.layers_ = m.layers;
  r.experts_ = m.experts;
  r.shards_ = m.remote->shards.size();
  const size_t count = static_cast<size_t>((m.layers - 1) * m.experts) * kTensorsPerExpert;
  const size_t want = kHeaderBytes + count * kRangeBytes + 4;
  if (bytes.size() != want)
    fail(file, ": ", bytes.size(), " bytes, expected ", want, " for ", m.layers - 1, " MoE layers x ", m.experts,
         " experts (rerun setup --stream)");
  if (std::memcmp(p, kMagic, 8) != 0) fail(file, ": not a deltafin expert-range file (bad magic)");
  if (load_u32le(p + want - 4) != crc32c(p, want - 4)) fail(file, ": checksum mismatch (the file is damaged; rerun setup --stream)");
  if (load_u64le(p + 8) != static_cast<uint64_t>(m.layers) || load_u64le(p + 16) != static_cast<uint64_t>(m.experts) ||
      load_u64le(p + 24) != r.shards_)
    fail(file, ": written for ", load_u64le(p + 8), " layers x ", load_u64le(p + 16), " experts over ", load_u64le(p + 24),
         " shards, but store.json has ", m.layers, " x ", m.experts, " over ", r.shards_);
  r.ranges_.resize(count);
  const uint8_t* q = p + kHeaderBytes;
  for (size_t i = 0; i < count; ++i, q += kRangeBytes) {
    TensorRange& t = r.ranges_[i];
    t.shard = load_u32le(q);
    t.offset = load_u64le(q + 4);
    t.bytes = load_u64le(q + 12);
    const int64_t layer = 1 + static_cast<int64_t>(i / kTensorsPerExpert) / m.experts;
    const int64_t expert = static_cast<int64_t>(i / kTensorsPerExpert) % m.experts;
    if (t.shard >= r.shards_)
      fail(file, ": (layer ", layer, ", expert ", expert, ") names shard ", t.shard, " of ", r.shards_);
    const uint64_t size = m.remote->shards[t.shard].bytes;
    if (t.offset > size || t.bytes > size - t.offset)
      fail(file, ": (layer ", layer, ", expert ", expert, ") range [", t.offset, ", ", t.offset + t.bytes,
           ") is outside ", m.remote->shards[t.shard].name, " (", size, " bytes)");
  }
  for (int64_t l = 1; l < m.layers; ++l)
    for (int64_t e = 0; e < m.experts; ++e) {
      uint64_t sum = 0;
      for (const TensorRange& t : r.tensors(l, e)) sum += t.bytes;
      if (sum != m.expert_bytes)
        fail(file, ": (layer ", l, ", expert ", e, ") ranges hold ", sum, " bytes, store.json says experts have ",
             m.expert_bytes);
    }
  return r;
}

std::span<const TensorRange> ExpertRanges::tensors(int64_t layer, int64_t expert) const {
  return {ranges_.data() + index(layer, expert), kTensorsPerExpert};
}

std::vector<TensorRange> ExpertRanges::requests(int64_t layer, int64_t expert) const {
  std::vector<TensorRange> out;
  for (const TensorRange& t : tensors(layer, expert)) {
    if (!out.empty() && out.back().shard == t.shard && out.back().offset + out.back().bytes == t.offset)
      out.back().bytes += t.bytes;
    else
      out.push_back(t);
  }
  return out;
}

}  // namespace deltafin
