#include "store/spine_layout.h"

#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

namespace {

using nlohmann::json;

constexpr int kSpineVersion = 1;
constexpr uint64_t kMaxHeader = 64ull << 20;  // a K3 layer file's header is a few kB

std::string header_json(SpineFormat format, const std::vector<SpineTensor>& tensors) {
  json list = json::array();
  for (const SpineTensor& t : tensors)
    list.push_back({{"name", t.name},
                    {"dtype", std::string(dtype_name(t.dtype))},
                    {"shape", t.shape},
                    {"offset", t.offset},
                    {"bytes", t.bytes}});
  return json{{"format", "deltafin-spine"},
              {"version", kSpineVersion},
              {"spine", spine_format_name(format)},
              {"tensors", list}}
      .dump();
}

}  // namespace

std::string layout_spine_file(SpineFormat format, std::vector<SpineTensor>& tensors, uint64_t* file_bytes) {
  // The offsets are written in the header, and the header's length decides the
  // first offset: start from a guess and repeat until the header fits in front
  // of the payloads it describes (two rounds at most in practice).
  uint64_t base = kSpineAlign;
  std::string text;
  for (;;) {
    uint64_t off = base;
    for (SpineTensor& t : tensors) {
      t.offset = off;
      off = round_up_spine(off + t.bytes);
    }
    text = header_json(format, tensors);
    const uint64_t need = round_up_spine(16 + text.size());
    if (need <= base) {
      *file_bytes = off;
      break;
    }
    base = need;
  }
  std::string head(base, '\0');
  std::memcpy(head.data(), kSpineMagic, 8);
  store_u64le(reinterpret_cast<uint8_t*>(head.data()) + 8, text.size());
  std::memcpy(head.data() + 16, text.data(), text.size());
  return head;
}

SpineHeader read_spine_header(const File& file) {
  const std::string& where = file.path();
  const uint64_t size = file.size();
  uint8_t pre[16];
  if (size < 16) fail(where, ": not a deltafin spine file (", size, " bytes)");
  file.pread_exact(pre, 16, 0);
  if (std::memcmp(pre, kSpineMagic, 8) != 0) fail(where, ": not a deltafin spine file (bad magic)");
  const uint64_t n = load_u64le(pre + 8);
  if (n > kMaxHeader || n > size - 16) fail(where, ": header length ", n, " does not fit the ", size, "-byte file");
  std::string text(n, '\0');
  file.pread_exact(text.data(), n, 16);
  json j;
  try {
    j = json::parse(text);
    SpineHeader h;
    if (j.at("format") != "deltafin-spine") fail(where, ": header field 'format' is not \"deltafin-spine\"");
    if (j.at("version") != kSpineVersion)
      fail(where, ": header field 'version' is ", j.at("version").dump(), ", this build reads ", kSpineVersion);
    const std::string spine = j.at("spine").get<std::string>();
    if (spine != "bf16" && spine != "int8-row")
      fail(where, ": header field 'spine' is \"", spine, "\" (expected bf16 or int8-row)");
    h.format = parse_spine_format(spine);
    uint64_t end = 16 + n;  // payloads follow the header, in order, without overlap
    std::set<std::string> names;
    for (const json& e : j.at("tensors")) {
      SpineTensor t;
      t.name = e.at("name").get<std::string>();
      const std::string dt = e.at("dtype").get<std::string>();
      std::optional<DType> type = parse_dtype(dt);
      if (!type || (*type != DType::BF16 && *type != DType::F32 && *type != DType::I8 && *type != DType::F16 &&
                    *type != DType::F8_E4M3))
        fail(where, ": tensor '", t.name, "': dtype ", dt, " (expected BF16, F32, I8, F16 or F8_E4M3)");
      t.dtype = *type;
      t.shape = e.at("shape").get<std::vector<uint64_t>>();
      t.offset = e.at("offset").get<uint64_t>();
      t.bytes = e.at("bytes").get<uint64_t>();
      uint64_t elements = 1;
      for (uint64_t s : t.shape) {
        if (s != 0 && elements > (1ull << 62) / s) fail(where, ": tensor '", t.name, "': shape too large");
        elements *= s;
      }
      if (elements * dtype_size(t.dtype) != t.bytes)
        fail(where, ": tensor '", t.name, "': ", t.bytes, " bytes do not match its dtype and shape");
      if (t.offset % kSpineAlign != 0 || t.offset < end || t.bytes > size || t.offset > size - t.bytes)
        fail(where, ": tensor '", t.name, "': payload [", t.offset, ", +", t.bytes,
             ") is misaligned, overlaps or lies outside the ", size, "-byte file");
      if (!names.insert(t.name).second) fail(where, ": tensor '", t.name, "' is listed twice");
      end = t.offset + t.bytes;
      h.tensors.push_back(std::move(t));
    }
    return h;
  } catch (const json::exception& e) {
    fail(where, ": malformed spine header: ", e.what());
  }
}

}  // namespace deltafin
