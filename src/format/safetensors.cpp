#include "format/safetensors.h"

#include <algorithm>
#include <set>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

namespace {

// A header larger than this is refused before it is read: real K3 shards have
// headers of a few hundred KiB, and this bounds the allocation a corrupt length
// could cause.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// The header is read this much at a time (one read for real headers).
constexpr uint64_t kHeaderPiece = 1ull << 20;

uint64_t checked_product(const std::vector<uint64_t>& shape, const std::string& where) {
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d != 0 && n > UINT64_MAX / d) fail(where, ": shape product overflows 64 bits");
    n *= d;
  }
  return n;
}

TensorInfo parse_entry(const std::string& name, const nlohmann::json& e, uint64_t data_start,
                       const std::string& file) {
  const std::string where = cat(file, ": tensor '", name, "'");
  if (!e.is_object()) fail(where, ": entry is not a JSON object");
  for (auto it = e.begin(); it != e.end(); ++it)
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
      fail(where, ": unexpected field '", it.key(), "'");
  if (!e.contains("dtype") || !e["dtype"].is_string()) fail(where, ": missing or non-string 'dtype'");
  if (!e.contains("shape") || !e["shape"].is_array()) fail(where, ": missing or non-array 'shape'");
  if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
    fail(where, ": 'data_offsets' must be an array of two integers");

  TensorInfo t;
  t.name = name;
  std::string dt = e["dtype"].get<std::string>();
  auto parsed = parse_dtype(dt);
  if (!parsed) fail(where, ": unknown dtype '", dt, "'");
  t.dtype = *parsed;
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) fail(where, ": shape entries must be non-negative integers, got ", d.dump());
    t.shape.push_back(d.get<uint64_t>());
  }
  for (const auto& o : e["data_offsets"])
    if (!o.is_number_unsigned()) fail(where, ": data_offsets must be non-negative integers, got ", o.dump());
  t.begin = e["data_offsets"][0].get<uint64_t>();
  t.end = e["data_offsets"][1].get<uint64_t>();
  if (t.end < t.begin) fail(where, ": data_offsets end ", t.end, " is before start ", t.begin);

  uint64_t elements = checked_product(t.shape, where);
  uint64_t size = dtype_size(t.dtype);
  if (elements > UINT64_MAX / size) fail(where, ": byte size overflows 64 bits");
  if (t.bytes() != elements * size)
    fail(where, ": holds ", t.bytes(), " bytes but dtype ", dt, " x shape needs ", elements * size);
  t.file_offset = data_start + t.begin;
  return t;
}

}  // namespace

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::vector<TensorInfo> parse_safetensors_header(const std::string& header_json, uint64_t header_length,
                                                 uint64_t payload_size, const std::string& where,
                                                 std::map<std::string, std::string>* metadata) {
  // nlohmann keeps one value per key, so a name duplicated in the raw text
  // would silently collapse: the parse callback sees every top-level key.
  // The same holds for the fields of one entry ("dtype" twice).
  std::set<std::string> names, entry_fields;
  std::string current;
  auto on_event = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::key && depth == 1) {
      current = parsed.get<std::string>();
      entry_fields.clear();
      if (!names.insert(current).second) fail(where, ": tensor '", current, "' appears twice in the header");
    } else if (ev == E::key && depth == 2) {
      std::string field = parsed.get<std::string>();
      if (!entry_fields.insert(field).second)
        fail(where, ": tensor '", current, "' has field '", field, "' twice");
    }
    return true;
  };
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(header_json, on_event);
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": header is not valid JSON: ", e.what());
  }
  if (!h.is_object()) fail(where, ": header is not a JSON object");

  const uint64_t data_start = 8 + header_length;
  std::vector<TensorInfo> tensors;
  tensors.reserve(h.size());
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) fail(where, ": __metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) fail(where, ": __metadata__ value for '", m.key(), "' is not a string");
        if (metadata) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    tensors.push_back(parse_entry(it.key(), it.value(), data_start, where));
  }
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    if (t.end > payload_size)
      fail(where, ": tensor '", t.name, "' data [", t.begin, ", ", t.end, ") lies outside the data section of ",
           payload_size, " bytes");
    if (i > 0 && t.begin < tensors[i - 1].end)
      fail(where, ": tensor '", t.name, "' data [", t.begin, ", ", t.end, ") overlaps tensor '",
           tensors[i - 1].name, "' [", tensors[i - 1].begin, ", ", tensors[i - 1].end, ")");
    // As the safetensors format requires, the payload is covered without holes:
    // bytes no tensor owns could hide anything (polyglot files).
    uint64_t expected_begin = i == 0 ? 0 : tensors[i - 1].end;
    if (t.begin != expected_begin)
      fail(where, ": tensor '", t.name, "' starts at ", t.begin, ", leaving a hole after byte ", expected_begin,
           " of the data section");
  }
  uint64_t covered = tensors.empty() ? 0 : tensors.back().end;
  if (covered != payload_size)
    fail(where, ": the data section has ", payload_size, " bytes but its tensors cover only ", covered,
         " (trailing bytes no tensor owns)");
  return tensors;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  return open(std::make_unique<LocalFileSource>(path));
}

SafetensorsFile SafetensorsFile::open(std::unique_ptr<ByteSource> source) {
  SafetensorsFile f;
  f.source_ = std::move(source);
  const std::string& path = f.source_->name();
  f.file_size_ = f.source_->size();
  if (f.file_size_ < 8) fail(path, ": too short for a safetensors file (", f.file_size_, " bytes)");
  uint8_t len_bytes[8];
  f.source_->read(len_bytes, 8, 0);
  f.header_length_ = load_u64le(len_bytes);
  if (f.header_length_ > f.file_size_ - 8)
    fail(path, ": header length ", f.header_length_, " goes beyond the end of the file (", f.file_size_,
         " bytes)");
  if (f.header_length_ > kMaxHeaderBytes) fail(path, ": header length ", f.header_length_, " exceeds the 100 MiB limit");
  // Read in pieces, the buffer growing as they arrive: a mirror's size
  // (setup --stream) is only what its HEAD reply claimed, and a header length
  // that such a size allows must not be allocated before its bytes exist.
  std::string header;
  for (uint64_t at = 0; at < f.header_length_;) {
    const uint64_t n = std::min(kHeaderPiece, f.header_length_ - at);
    header.resize(at + n);
    f.source_->read(header.data() + at, n, 8 + at);
    at += n;
  }
  f.tensors_ = parse_safetensors_header(header, f.header_length_, f.file_size_ - 8 - f.header_length_, path,
                                        &f.metadata_);
  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_.emplace(f.tensors_[i].name, i);
  return f;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::read(const TensorInfo& t, void* dst) const { source_->read(dst, t.bytes(), t.file_offset); }

void SafetensorsFile::read_range(const TensorInfo& t, uint64_t offset, uint64_t n, void* dst) const {
  if (offset > t.bytes() || n > t.bytes() - offset)
    fail(path(), ": tensor '", t.name, "': range [", offset, ", ", offset + n, ") outside its ", t.bytes(), " bytes");
  source_->read(dst, n, t.file_offset + offset);
}

}  // namespace deltafin
