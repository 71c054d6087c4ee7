#include "store/store_manifest.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <cstdio>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "format/dtype.h"
#include "util/error.h"
#include "util/file.h"
#include "util/sha256.h"

namespace deltafin {

namespace {

using nlohmann::json;

// Stores before version 4 are Kimi K3's: layer 0 is the dense layer, every
// later one is MoE. The manifest lists placements for exactly the MoE layers.
constexpr int64_t kK3FirstMoeLayer = 1;

std::string manifest_path(const std::string& store_dir) {
  return (std::filesystem::path(store_dir) / "store.json").string();
}

// Reads one JSON object's fields with errors naming the file and the field's
// full path ("store.json: field 'drives[1].path': ..."). Unknown keys are
// refused: a misspelt field must not be silently ignored.
class Fields {
public:
  Fields(const json& obj, const std::string& file, std::string prefix) : obj_(obj), file_(file), prefix_(std::move(prefix)) {
    if (!obj.is_object()) fail(file_, ": field '", prefix_.empty() ? "(root)" : prefix_, "' must be an object");
  }

  std::string name(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  const json& get(const std::string& key) {
    auto it = obj_.find(key);
    if (it == obj_.end()) fail(file_, ": field '", name(key), "' is missing");
    ++read_;
    return *it;
  }

  std::string str(const std::string& key) {
    const json& v = get(key);
    if (!v.is_string()) fail(file_, ": field '", name(key), "' must be a string");
    return v.get<std::string>();
  }

  uint64_t u64(const std::string& key) { return as_u64(get(key), name(key)); }

  int64_t count(const std::string& key) {
    uint64_t v = u64(key);
    if (v > (1u << 20)) fail(file_, ": field '", name(key), "' = ", v, " is implausibly large");
    return static_cast<int64_t>(v);
  }

  double positive(const std::string& key) {
    const json& v = get(key);
    if (!v.is_number()) fail(file_, ": field '", name(key), "' must be a number");
    double d = v.get<double>();
    if (!std::isfinite(d) || d <= 0) fail(file_, ": field '", name(key), "' = ", d, " must be finite and > 0");
    return d;
  }

  const json& array(const std::string& key) {
    const json& v = get(key);
    if (!v.is_array()) fail(file_, ": field '", name(key), "' must be an array");
    return v;
  }

  uint64_t as_u64(const json& v, const std::string& field) const {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      fail(file_, ": field '", field, "' must be a non-negative integer");
    return v.get<uint64_t>();
  }

  // Call after reading every field once (`known` lists them): anything else
  // is unknown. Counting keeps this cheap for 82,432 placements.
  void no_other_fields(std::initializer_list<const char*> known) const {
    if (obj_.size() == read_) return;
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (std::find_if(known.begin(), known.end(), [&](const char* k) { return it.key() == k; }) == known.end())
        fail(file_, ": unknown field '", name(it.key()), "'");
  }

private:
  const json& obj_;
  const std::string& file_;
  std::string prefix_;
  size_t read_ = 0;
};

std::string item(const std::string& array, size_t i) { return cat(array, "[", i, "]"); }

bool parse_hex_digest(const std::string& hex, Sha256Digest* out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    int v = 0;
    for (int k = 0; k < 2; ++k) {
      char c = hex[2 * i + k];
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
      if (d < 0) return false;  // lowercase only: one spelling per hash
      v = v * 16 + d;
    }
    (*out)[i] = static_cast<uint8_t>(v);
  }
  return true;
}

void check_hex(const std::string& file, const std::string& field, const std::string& hex, bool allow_empty) {
  Sha256Digest d;
  if (allow_empty && hex.empty()) return;
  if (!parse_hex_digest(hex, &d))
    fail(file, ": field '", field, "' = \"", hex, "\" is not a SHA-256 (64 lowercase hex digits)");
}

RemoteSource parse_remote(const json& j, const std::string& file) {
  Fields r(j, file, "remote");
  RemoteSource out;
  out.url = r.str("url");
  if (out.url.rfind("http://", 0) != 0 && out.url.rfind("https://", 0) != 0)
    fail(file, ": field 'remote.url' = \"", out.url, "\" must start with http:// or https://");
  if (out.url.back() == '/') fail(file, ": field 'remote.url' = \"", out.url, "\" must not end with '/'");
  out.checksums = r.str("checksums");
  out.disk_budget_bytes = r.u64("disk_budget_bytes");
  const json& shards = r.array("shards");
  if (shards.empty()) fail(file, ": field 'remote.shards' is empty");
  std::set<std::string> names;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string p = item("remote.shards", i);
    Fields f(shards[i], file, p);
    RemoteFile s;
    s.name = f.str("name");
    s.bytes = f.u64("bytes");
    s.etag = f.str("etag");
    s.sha256 = f.str("sha256");
    f.no_other_fields({"name", "bytes", "etag", "sha256"});
    if (s.name.empty() || s.name.find('/') != std::string::npos || s.name == "." || s.name == "..")
      fail(file, ": field '", p, ".name' = \"", s.name, "\" must be a plain file name");
    if (!names.insert(s.name).second) fail(file, ": field '", p, ".name': \"", s.name, "\" is listed twice");
    check_hex(file, p + ".sha256", s.sha256, true);
    out.shards.push_back(std::move(s));
  }
  r.no_other_fields({"url", "checksums", "disk_budget_bytes", "shards"});
  return out;
}

}  // namespace

const char* spine_format_name(SpineFormat f) { return f == SpineFormat::BF16 ? "bf16" : "int8-row"; }

SpineFormat parse_spine_format(const std::string& name) {
  if (name == "bf16") return SpineFormat::BF16;
  if (name == "int8-row") return SpineFormat::Int8Row;
  fail("unknown spine format '", name, "' (expected bf16 or int8-row)");
}

std::string expert_relative_path(int64_t layer, int64_t expert) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "deltafin-experts/L%03lld/E%03lld.bin", static_cast<long long>(layer),
                static_cast<long long>(expert));
  return buf;
}

std::string stripe_relative_path(int64_t layer, int64_t expert, int stripe, int stripes) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "deltafin-experts/L%03lld/E%03lld.s%dof%d.bin", static_cast<long long>(layer),
                static_cast<long long>(expert), stripe, stripes);
  return buf;
}

uint64_t StoreManifest::stripe_bytes(int drive) const {
  if (!striped() || drive < 0 || static_cast<size_t>(drive) + 1 >= stripe_offsets.size())
    fail("store manifest: no stripe ", drive, " (", striped() ? "the store has " + std::to_string(drives.size()) + " stripes" : "the store is not striped", ")");
  return stripe_offsets[static_cast<size_t>(drive) + 1] - stripe_offsets[static_cast<size_t>(drive)];
}

std::string StoreManifest::stripe_path(int drive, int64_t layer, int64_t expert) const {
  stripe_bytes(drive);  // checks the index
  return drives[static_cast<size_t>(drive)].path + "/" +
         stripe_relative_path(layer, expert, drive, static_cast<int>(drives.size()));
}

std::string StoreManifest::file_on_drive(int drive, int64_t layer, int64_t expert) const {
  return striped() ? stripe_path(drive, layer, expert) : expert_path(drive, layer, expert);
}

uint64_t StoreManifest::bytes_on_drive(int drive) const { return striped() ? stripe_bytes(drive) : expert_bytes; }

std::vector<int64_t> moe_layer_positions(const std::vector<int64_t>& moe_layers, int64_t layers, const std::string& where) {
  std::vector<int64_t> position(static_cast<size_t>(std::max<int64_t>(layers, 0)), -1);
  for (size_t i = 0; i < moe_layers.size(); ++i) {
    const int64_t l = moe_layers[i];
    if (l < 0 || l >= layers || (i && l <= moe_layers[i - 1]))
      fail(where, ": MoE layer ", l, " is out of order or past the ", layers, " layers");
    position[static_cast<size_t>(l)] = static_cast<int64_t>(i);
  }
  return position;
}

bool StoreManifest::is_moe_layer(int64_t layer) const {
  return std::binary_search(moe_layers.begin(), moe_layers.end(), layer);
}

std::optional<size_t> StoreManifest::entry_index(int64_t layer, int64_t expert) const {
  if (layer < 0 || layer >= layers || expert < 0 || expert >= experts)
    fail("store manifest: no entry for (layer ", layer, ", expert ", expert, "); the store has ", layers, " layers x ",
         experts, " experts");
  const auto it = std::lower_bound(moe_layers.begin(), moe_layers.end(), layer);
  if (it == moe_layers.end() || *it != layer) return std::nullopt;
  const size_t i = static_cast<size_t>(it - moe_layers.begin()) * static_cast<size_t>(experts) + static_cast<size_t>(expert);
  if (i >= entries.size())
    fail("store manifest: no entry for (layer ", layer, ", expert ", expert, "); it holds ", entries.size(),
         " entries for ", moe_layers.size(), " MoE layers x ", experts, " experts");
  return i;
}

const ExpertEntry& StoreManifest::entry(int64_t layer, int64_t expert) const {
  static const ExpertEntry kDense;  // no drives, no hashes
  const std::optional<size_t> i = entry_index(layer, expert);
  return i ? entries[*i] : kDense;
}

ExpertEntry& StoreManifest::moe_entry(int64_t layer, int64_t expert) {
  const std::optional<size_t> i = entry_index(layer, expert);
  if (!i) fail("store manifest: layer ", layer, " is dense; it has no expert entries");
  return entries[*i];
}

std::string StoreManifest::expert_path(int drive, int64_t layer, int64_t expert) const {
  if (drive < 0 || static_cast<size_t>(drive) >= drives.size())
    fail("store manifest: no drive ", drive, " (the store has ", drives.size(), ")");
  return drives[static_cast<size_t>(drive)].path + "/" + expert_relative_path(layer, expert);
}

StoreManifest load_store_manifest(const std::string& store_dir) {
  const std::string file = manifest_path(store_dir);
  return parse_store_manifest(read_text_file(file), file);
}

StoreManifest parse_store_manifest(std::string_view text, const std::string& file) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    fail(file, ": not valid JSON: ", e.what());
  }
  StoreManifest m;
  Fields top(root, file, "");
  if (top.str("format") != "deltafin-store") fail(file, ": field 'format' must be \"deltafin-store\"");
  const uint64_t version = top.u64("version");
  if (version < 1 || version > static_cast<uint64_t>(kStoreManifestVersion))
    fail(file, ": field 'version' is ", version, ", this build reads versions 1 to ", kStoreManifestVersion,
         " (rerun setup to rebuild the store)");
  m.version = static_cast<int>(version);

  {
    Fields src(top.get("source"), file, "source");
    m.source_dir = src.str("dir");
    const json& files = src.array("files");
    std::set<std::string> names;
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string p = item("source.files", i);
      Fields f(files[i], file, p);
      SourceFile s;
      s.name = f.str("name");
      s.bytes = f.u64("bytes");
      s.sha256 = f.str("sha256");
      f.no_other_fields({"name", "bytes", "sha256"});
      if (s.name.empty() || s.name.find('/') != std::string::npos || s.name == "." || s.name == "..")
        fail(file, ": field '", p, ".name' = \"", s.name, "\" must be a plain file name");
      if (!names.insert(s.name).second) fail(file, ": field '", p, ".name': \"", s.name, "\" is listed twice");
      check_hex(file, p + ".sha256", s.sha256, true);
      m.source_files.push_back(std::move(s));
    }
    src.no_other_fields({"dir", "files"});
  }

  {
    Fields sp(top.get("spine"), file, "spine");
    try {
      m.spine_format = parse_spine_format(sp.str("format"));
    } catch (const Error& e) {
      fail(file, ": field 'spine.format': ", e.what());
    }
    m.spine_reason = sp.str("reason");
    m.spine_bytes = sp.u64("bytes");
    const json& files = sp.array("files");
    if (files.empty()) fail(file, ": field 'spine.files' is empty");
    std::set<std::string> paths;
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string p = item("spine.files", i);
      Fields f(files[i], file, p);
      SpineFileEntry s;
      s.path = f.str("path");
      s.bytes = f.u64("bytes");
      s.sha256 = f.str("sha256");
      f.no_other_fields({"path", "bytes", "sha256"});
      if (s.path.rfind("spine/", 0) != 0 || s.path.find("..") != std::string::npos)
        fail(file, ": field '", p, ".path' = \"", s.path, "\" must be a file under spine/");
      if (!paths.insert(s.path).second) fail(file, ": field '", p, ".path': \"", s.path, "\" is listed twice");
      check_hex(file, p + ".sha256", s.sha256, false);
      m.spine_files.push_back(std::move(s));
    }
    sp.no_other_fields({"format", "reason", "bytes", "files"});
  }

  {
    const json& drives = top.array("drives");
    if (drives.empty()) fail(file, ": field 'drives' is empty");
    if (drives.size() > 65535) fail(file, ": field 'drives' has ", drives.size(), " entries (at most 65535)");
    std::set<std::string> paths;
    for (size_t i = 0; i < drives.size(); ++i) {
      const std::string p = item("drives", i);
      Fields f(drives[i], file, p);
      StoreDrive d;
      d.path = f.str("path");
      d.read_bytes_per_s = f.positive("read_bytes_per_s");
      d.bandwidth_source = f.str("bandwidth_source");
      f.no_other_fields({"path", "read_bytes_per_s", "bandwidth_source"});
      if (d.path.empty() || d.path[0] != '/') fail(file, ": field '", p, ".path' = \"", d.path, "\" must be absolute");
      if (!paths.insert(d.path).second) fail(file, ": field '", p, ".path': \"", d.path, "\" is listed twice");
      m.drives.push_back(std::move(d));
    }
  }

  m.layers = top.count("layers");
  m.experts = top.count("experts");
  m.expert_bytes = top.u64("expert_bytes");
  if (m.layers < 1) fail(file, ": field 'layers' = ", m.layers, " (must be at least 1)");
  if (m.experts < 1) fail(file, ": field 'experts' = ", m.experts, " (must be at least 1)");
  if (m.expert_bytes == 0) fail(file, ": field 'expert_bytes' must be > 0");
  if (version >= 4) {
    m.family = top.str("family");
    const json& layers = top.array("moe_layers");
    for (size_t k = 0; k < layers.size(); ++k) {
      const uint64_t l = top.as_u64(layers[k], cat("moe_layers[", k, "]"));
      if (l >= static_cast<uint64_t>(m.layers) || (k && static_cast<int64_t>(l) <= m.moe_layers.back()))
        fail(file, ": field 'moe_layers[", k, "]' = ", l, ": layers must rise and be below 'layers' (", m.layers, ")");
      m.moe_layers.push_back(static_cast<int64_t>(l));
    }
    if (m.moe_layers.empty()) fail(file, ": field 'moe_layers' is empty (a store holds routed experts)");
    const json& parts = top.array("record");
    uint64_t at = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      const std::string p = item("record", k);
      Fields f(parts[k], file, p);
      RecordPart part;
      part.tensor = f.str("tensor");
      part.dtype = f.str("dtype");
      uint64_t elements = 1;
      for (const json& d : f.array("shape")) part.shape.push_back(f.as_u64(d, p + ".shape")), elements *= part.shape.back();
      part.offset = f.u64("offset");
      part.bytes = f.u64("bytes");
      const std::optional<DType> dtype = parse_dtype(part.dtype);
      if (!dtype) fail(file, ": field '", p, ".dtype' = \"", part.dtype, "\" is not a safetensors dtype");
      if (part.bytes != elements * dtype_size(*dtype))
        fail(file, ": field '", p, ".bytes' = ", part.bytes, ", but ", part.dtype, " of that shape holds ",
             elements * dtype_size(*dtype));
      if (part.offset != at) fail(file, ": field '", p, ".offset' = ", part.offset, ", expected ", at, " (parts are back to back)");
      at += part.bytes;
      f.no_other_fields({"tensor", "dtype", "shape", "offset", "bytes"});
      m.record.push_back(std::move(part));
    }
    if (at != m.expert_bytes)
      fail(file, ": field 'record': the parts hold ", at, " bytes, but 'expert_bytes' is ", m.expert_bytes);
  } else {
    for (const char* key : {"family", "moe_layers", "record"})
      if (root.contains(key)) fail(file, ": unknown field '", key, "' (version ", version, " manifests are K3 stores without it)");
    if (m.layers < 2) fail(file, ": field 'layers' = ", m.layers, " (a K3 model has at least 2)");
    for (int64_t l = kK3FirstMoeLayer; l < m.layers; ++l) m.moe_layers.push_back(l);
  }

  if (root.contains("remote")) {
    if (version < 2) fail(file, ": unknown field 'remote' (version 1 manifests have no mirror)");
    m.remote = parse_remote(top.get("remote"), file);
  }

  if (root.contains("stripe_offsets")) {
    if (version < 3) fail(file, ": unknown field 'stripe_offsets' (version ", version, " manifests have no stripes)");
    if (m.remote) fail(file, ": field 'stripe_offsets': a streamed store (field 'remote') cannot be striped");
    const json& offs = top.array("stripe_offsets");
    if (offs.size() != m.drives.size() + 1)
      fail(file, ": field 'stripe_offsets' has ", offs.size(), " entries, expected drives + 1 = ", m.drives.size() + 1);
    for (size_t k = 0; k < offs.size(); ++k) {
      const uint64_t o = top.as_u64(offs[k], cat("stripe_offsets[", k, "]"));
      const uint64_t prev = k ? m.stripe_offsets.back() : 0;
      const bool last = k + 1 == offs.size();
      if ((k == 0 && o != 0) || (k > 0 && o <= prev) || (last && o != m.expert_bytes) || (!last && o % 4096 != 0))
        fail(file, ": field 'stripe_offsets[", k, "]' = ", o, ": offsets must start at 0, rise, be multiples of 4096",
             " and end at expert_bytes (", m.expert_bytes, ")");
      m.stripe_offsets.push_back(o);
    }
  }

  {
    const json& placement = top.array("placement");
    const size_t want = m.moe_layers.size() * static_cast<size_t>(m.experts);
    if (placement.size() != want)
      fail(file, ": field 'placement' has ", placement.size(), " entries, expected one per MoE (layer, expert) = ", want);
    m.entries.assign(placement.size(), ExpertEntry{});
    for (size_t i = 0; i < placement.size(); ++i) {
      const std::string p = item("placement", i);
      Fields f(placement[i], file, p);
      const int64_t layer = m.moe_layers[i / static_cast<size_t>(m.experts)];
      const int64_t expert = static_cast<int64_t>(i) % m.experts;
      // Listed in (layer, expert) order, so the position says which one it is;
      // the explicit fields make the file readable and catch a shifted list.
      const int64_t got_layer = f.count("layer"), got_expert = f.count("expert");
      if (got_layer != layer || got_expert != expert)
        fail(file, ": field '", p, "' is for (layer ", got_layer, ", expert ", got_expert, "), expected (layer ", layer,
             ", expert ", expert, ")");
      ExpertEntry e;
      const json& drives = f.array("drives");
      if (drives.empty()) fail(file, ": field '", p, ".drives' is empty");
      for (size_t k = 0; k < drives.size(); ++k) {
        const uint64_t d = f.as_u64(drives[k], cat(p, ".drives[", k, "]"));
        if (d >= m.drives.size())
          fail(file, ": field '", p, ".drives[", k, "]' = ", d, " but the store has ", m.drives.size(), " drives");
        for (uint16_t prev : e.drives)
          if (prev == d) fail(file, ": field '", p, ".drives' names drive ", d, " twice");
        e.drives.push_back(static_cast<uint16_t>(d));
      }
      const std::string hex = f.str("sha256");
      // A streamed store learns an expert's hash at its first fetch.
      e.hash_known = !(m.remote && hex.empty());
      if (e.hash_known && !parse_hex_digest(hex, &e.sha256))
        fail(file, ": field '", p, ".sha256' = \"", hex, "\" is not a SHA-256 (64 lowercase hex digits)");
      const uint64_t crc = f.u64("crc32c");
      if (!e.hash_known && crc != 0)
        fail(file, ": field '", p, ".crc32c' = ", crc, " but its sha256 is empty (not fetched yet); expected 0");
      if (crc > 0xffffffffu) fail(file, ": field '", p, ".crc32c' = ", crc, " does not fit 32 bits");
      e.crc32c = static_cast<uint32_t>(crc);
      if (m.striped()) {
        if (drives.size() != m.drives.size())
          fail(file, ": field '", p, ".drives': a striped store's expert is on every drive (", m.drives.size(), "), not ",
               drives.size());
        for (size_t k = 0; k < e.drives.size(); ++k)
          if (e.drives[k] != k) fail(file, ": field '", p, ".drives[", k, "]' = ", e.drives[k], ": stripes are listed in drive order");
        const json& crcs = f.array("stripe_crc32c");
        if (crcs.size() != m.drives.size())
          fail(file, ": field '", p, ".stripe_crc32c' has ", crcs.size(), " entries, expected one per drive = ", m.drives.size());
        for (size_t k = 0; k < crcs.size(); ++k) {
          const uint64_t c = f.as_u64(crcs[k], cat(p, ".stripe_crc32c[", k, "]"));
          if (c > 0xffffffffu) fail(file, ": field '", p, ".stripe_crc32c[", k, "]' = ", c, " does not fit 32 bits");
          e.stripe_crc32c.push_back(static_cast<uint32_t>(c));
        }
      }
      if (m.striped()) f.no_other_fields({"layer", "expert", "drives", "sha256", "crc32c", "stripe_crc32c"});
      else f.no_other_fields({"layer", "expert", "drives", "sha256", "crc32c"});
      m.entries[i] = std::move(e);
    }
  }
  top.no_other_fields(
      {"format", "version", "source", "spine", "drives", "family", "layers", "moe_layers", "experts", "expert_bytes",
       "record", "stripe_offsets", "remote", "placement"});
  return m;
}

void save_store_manifest(const std::string& store_dir, const StoreManifest& m) {
  write_file_atomic(manifest_path(store_dir), format_store_manifest(m));
}

std::string format_store_manifest(const StoreManifest& m) {
  // A manifest made in code without its MoE layers is a K3 one (1 .. L-1).
  std::vector<int64_t> moe_layers = m.moe_layers;
  if (moe_layers.empty() && m.family == "kimi_k3")
    for (int64_t l = kK3FirstMoeLayer; l < m.layers; ++l) moe_layers.push_back(l);
  if (moe_layers.empty()) fail("save_store_manifest: a ", m.family, " store needs its MoE layers");
  if (m.layers < 1 || m.experts < 1 || m.entries.size() != moe_layers.size() * static_cast<size_t>(m.experts))
    fail("save_store_manifest: entries has ", m.entries.size(), " items for ", moe_layers.size(), " MoE layers x ",
         m.experts, " experts");
  // ordered_json: the file reads top-down in the order of the header.
  using ojson = nlohmann::ordered_json;
  ojson files = ojson::array();
  for (const SourceFile& s : m.source_files) files.push_back({{"name", s.name}, {"bytes", s.bytes}, {"sha256", s.sha256}});
  ojson spine_files = ojson::array();
  for (const SpineFileEntry& s : m.spine_files)
    spine_files.push_back({{"path", s.path}, {"bytes", s.bytes}, {"sha256", s.sha256}});
  ojson drives = ojson::array();
  for (const StoreDrive& d : m.drives)
    drives.push_back({{"path", d.path}, {"read_bytes_per_s", d.read_bytes_per_s}, {"bandwidth_source", d.bandwidth_source}});
  // One placement per line, formatted here: readable and diffable at K3 scale
  // (82,432 lines), where an indented dump would spread each over ten lines
  // and building them as JSON objects costs most of a second.
  std::string lines = "[";
  for (size_t p = 0; p < moe_layers.size(); ++p)
    for (int64_t e = 0; e < m.experts; ++e) {
      const int64_t l = moe_layers[p];
      const ExpertEntry& x = m.entries[p * static_cast<size_t>(m.experts) + static_cast<size_t>(e)];
      lines += l == moe_layers.front() && e == 0 ? "\n  " : ",\n  ";
      lines += "{\"layer\":" + std::to_string(l) + ",\"expert\":" + std::to_string(e) + ",\"drives\":[";
      for (size_t k = 0; k < x.drives.size(); ++k) lines += (k ? "," : "") + std::to_string(x.drives[k]);
      lines += "],\"sha256\":\"" + (x.hash_known ? to_hex(x.sha256) : std::string()) +
               "\",\"crc32c\":" + std::to_string(x.hash_known ? x.crc32c : 0);
      if (m.striped()) {
        lines += ",\"stripe_crc32c\":[";
        for (size_t k = 0; k < x.stripe_crc32c.size(); ++k) lines += (k ? "," : "") + std::to_string(x.stripe_crc32c[k]);
        lines += "]";
      }
      lines += "}";
    }
  lines += "\n ]";
  ojson record = ojson::array();
  for (const RecordPart& p : m.record)
    record.push_back({{"tensor", p.tensor}, {"dtype", p.dtype}, {"shape", p.shape}, {"offset", p.offset}, {"bytes", p.bytes}});
  // A store read from a manifest before version 4 (a K3 store) has no record
  // layout to write; it keeps its version and reads back as it was.
  const bool v4 = !m.record.empty();
  if (!v4 && (m.family != "kimi_k3" || moe_layers.front() != 1 || moe_layers.size() != static_cast<size_t>(m.layers - 1)))
    fail("save_store_manifest: a ", m.family, " store needs its record layout");
  ojson root = {{"format", "deltafin-store"},
               {"version", v4 ? kStoreManifestVersion : std::min(m.version, 3)},
               {"source", {{"dir", m.source_dir}, {"files", files}}},
               {"spine",
                {{"format", spine_format_name(m.spine_format)},
                 {"reason", m.spine_reason},
                 {"bytes", m.spine_bytes},
                 {"files", spine_files}}},
               {"drives", drives}};
  if (v4) root["family"] = m.family;
  root["layers"] = m.layers;
  if (v4) root["moe_layers"] = moe_layers;
  root["experts"] = m.experts;
  root["expert_bytes"] = m.expert_bytes;
  if (v4) root["record"] = record;
  if (m.striped()) {
    if (m.stripe_offsets.size() != m.drives.size() + 1)
      fail("save_store_manifest: ", m.stripe_offsets.size(), " stripe offsets for ", m.drives.size(), " drives");
    root["stripe_offsets"] = m.stripe_offsets;
  }
  if (m.remote) {
    ojson shards = ojson::array();
    for (const RemoteFile& f : m.remote->shards)
      shards.push_back({{"name", f.name}, {"bytes", f.bytes}, {"etag", f.etag}, {"sha256", f.sha256}});
    root["remote"] = {{"url", m.remote->url},
                      {"checksums", m.remote->checksums},
                      {"disk_budget_bytes", m.remote->disk_budget_bytes},
                      {"shards", shards}};
  }
  root["placement"] = "@placement@";
  std::string text = root.dump(1);
  text.replace(text.find("\"@placement@\""), 13, lines);
  return text + "\n";
}

}  // namespace deltafin
