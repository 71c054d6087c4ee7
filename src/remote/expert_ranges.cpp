#include "remote/expert_ranges.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "util/crc32c.h"
#include "util/error.h"
#include "util/file.h"
#include "util/numeric.h"

namespace deltafin {

namespace {

constexpr char kMagicV1[8] = {'D', 'F', 'X', 'R', '0', '0', '0', '1'};
constexpr char kMagicV2[8] = {'D', 'F', 'X', 'R', '0', '0', '0', '2'};
constexpr size_t kV1HeaderBytes = 8 + 3 * 8;
constexpr size_t kV1Parts = 6;  // K3's record: w1, w2, w3, packed and scale each
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

void ExpertRanges::set_layers(int64_t layers, std::vector<int64_t> moe_layers) {
  layers_ = layers;
  moe_layers_ = std::move(moe_layers);
  slot_ = moe_layer_positions(moe_layers_, layers, "remote expert ranges");
}

size_t ExpertRanges::index(int64_t layer, int64_t expert) const {
  if (layer < 0 || layer >= layers_ || slot_[static_cast<size_t>(layer)] < 0 || expert < 0 || expert >= experts_)
    fail("remote expert ranges: no routed expert (layer ", layer, ", expert ", expert, ")");
  return static_cast<size_t>(slot_[static_cast<size_t>(layer)] * experts_ + expert) * parts_;
}

ExpertRanges ExpertRanges::from_checkpoint(const FamilyCheckpoint& k, const std::vector<RemoteFile>& shards) {
  std::map<std::string, uint32_t> shard_of;
  for (size_t i = 0; i < shards.size(); ++i) shard_of[shards[i].name] = static_cast<uint32_t>(i);
  ExpertRanges r;
  r.set_layers(k.layers(), k.moe_layers());
  r.experts_ = k.experts();
  r.shards_ = shards.size();
  r.parts_ = k.record_layout().size();
  r.ranges_.reserve(r.moe_layers_.size() * static_cast<size_t>(r.experts_) * r.parts_);
  for (int64_t l : r.moe_layers_)
    for (int64_t e = 0; e < r.experts_; ++e) {
      const std::vector<std::string> names = k.expert_tensor_names(l, e);
      if (names.size() != r.parts_)
        fail(k.tensors().dir(), ": layer ", l, " expert ", e, " has ", names.size(), " tensors, the record ", r.parts_);
      for (const std::string& name : names) {
        const TensorRef t = k.tensors().find(name);
        if (!t) fail(k.tensors().dir(), ": tensor '", name, "' is missing");
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
  const size_t header = 8 + 5 * 8 + moe_layers_.size() * 8;
  std::string bytes(header + ranges_.size() * kRangeBytes + 4, '\0');
  uint8_t* p = reinterpret_cast<uint8_t*>(bytes.data());
  std::memcpy(p, kMagicV2, 8);
  store_u64le(p + 8, static_cast<uint64_t>(layers_));
  store_u64le(p + 16, static_cast<uint64_t>(experts_));
  store_u64le(p + 24, shards_);
  store_u64le(p + 32, parts_);
  store_u64le(p + 40, moe_layers_.size());
  for (size_t i = 0; i < moe_layers_.size(); ++i) store_u64le(p + 48 + 8 * i, static_cast<uint64_t>(moe_layers_[i]));
  uint8_t* q = p + header;
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
  // What the manifest says the file describes (stores before version 4: K3's layout).
  std::vector<int64_t> layers = m.moe_layers;
  if (layers.empty())
    for (int64_t l = 1; l < m.layers; ++l) layers.push_back(l);
  const size_t parts = m.record.empty() ? kV1Parts : m.record.size();
  const bool v1 = bytes.size() >= 8 && std::memcmp(p, kMagicV1, 8) == 0;
  const size_t header = v1 ? kV1HeaderBytes : 8 + 5 * 8 + layers.size() * 8;
  const size_t count = layers.size() * static_cast<size_t>(m.experts) * parts;
  const size_t want = header + count * kRangeBytes + 4;
  if (bytes.size() != want)
    fail(file, ": ", bytes.size(), " bytes, expected ", want, " for ", layers.size(), " MoE layers x ", m.experts,
         " experts of ", parts, " tensors (rerun setup --stream)");
  if (!v1 && std::memcmp(p, kMagicV2, 8) != 0) fail(file, ": not a deltafin expert-range file (bad magic)");
  if (load_u32le(p + want - 4) != crc32c(p, want - 4))
    fail(file, ": checksum mismatch (the file is damaged; rerun setup --stream)");
  ExpertRanges r;
  r.experts_ = m.experts;
  r.shards_ = m.remote->shards.size();
  r.parts_ = parts;
  if (load_u64le(p + 8) != static_cast<uint64_t>(m.layers) || load_u64le(p + 16) != static_cast<uint64_t>(m.experts) ||
      load_u64le(p + 24) != r.shards_)
    fail(file, ": written for ", load_u64le(p + 8), " layers x ", load_u64le(p + 16), " experts over ", load_u64le(p + 24),
         " shards, but store.json has ", m.layers, " x ", m.experts, " over ", r.shards_);
  if (v1 && (parts != kV1Parts || layers.front() != 1 || layers.size() != static_cast<size_t>(m.layers - 1)))
    fail(file, ": a version 1 file (K3's six tensors, MoE layers 1..", m.layers - 1,
         ") for a store of another record layout (rerun setup --stream)");
  if (!v1) {
    bool same = load_u64le(p + 32) == parts && load_u64le(p + 40) == layers.size();
    for (size_t i = 0; same && i < layers.size(); ++i) same = load_u64le(p + 48 + 8 * i) == static_cast<uint64_t>(layers[i]);
    if (!same)
      fail(file, ": written for ", load_u64le(p + 40), " MoE layers of ", load_u64le(p + 32),
           " tensors per record, not store.json's ", layers.size(), " of ", parts, " (rerun setup --stream)");
  }
  r.set_layers(m.layers, layers);
  r.ranges_.resize(count);
  const uint8_t* q = p + header;
  for (size_t i = 0; i < count; ++i, q += kRangeBytes) {
    TensorRange& t = r.ranges_[i];
    t.shard = load_u32le(q);
    t.offset = load_u64le(q + 4);
    t.bytes = load_u64le(q + 12);
    const size_t record = i / parts;
    const int64_t layer = layers[record / static_cast<size_t>(m.experts)];
    const int64_t expert = static_cast<int64_t>(record % static_cast<size_t>(m.experts));
    if (t.shard >= r.shards_)
      fail(file, ": (layer ", layer, ", expert ", expert, ") names shard ", t.shard, " of ", r.shards_);
    const uint64_t size = m.remote->shards[t.shard].bytes;
    if (t.offset > size || t.bytes > size - t.offset)
      fail(file, ": (layer ", layer, ", expert ", expert, ") range [", t.offset, ", ", t.offset + t.bytes,
           ") is outside ", m.remote->shards[t.shard].name, " (", size, " bytes)");
  }
  for (int64_t l : layers)
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
  return {ranges_.data() + index(layer, expert), parts_};
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
