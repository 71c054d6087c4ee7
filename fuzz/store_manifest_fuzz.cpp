// libFuzzer target: a store's manifest, store.json (store/store_manifest.h).
//
// The input bytes are a store.json. parse_store_manifest either accepts it or
// throws deltafin::Error naming the file; it must not allocate in proportion
// to a count the file claims but does not back with entries (libFuzzer's
// -malloc_limit_mb in scripts/fuzz.sh turns that into a crash). An accepted
// manifest keeps its promises: one entry per placement (an expert of a MoE
// layer; the MoE layers rise below `layers`), each on distinct existing
// drives, and a dense layer's experts read as empty; a striped store's
// offsets rise from 0 to expert_bytes with one stripe per drive; the record's
// parts lie back to back over expert_bytes, each holding its dtype x shape
// (computed without overflow); and it round-trips: format_store_manifest
// writes a text that parses back to the same manifest (the same text again).
// Any other exception, crash or sanitizer report is a bug.
//
// Run with scripts/fuzz.sh; the seed corpus is fuzz/corpus/store_manifest/,
// the dictionary fuzz/store_manifest.dict.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "format/dtype.h"
#include "store/store_manifest.h"
#include "util/error.h"

namespace {

using deltafin::StoreManifest;

const std::string kFile = "fuzz/store.json";

[[noreturn]] void bad(const std::string& what) {
  std::fprintf(stderr, "store manifest breaks its contract: %s\n", what.c_str());
  std::abort();
}

void check_accepted(const StoreManifest& m) {
  if (m.layers < 1 || m.experts < 1 || m.expert_bytes == 0) bad("empty dimensions");
  // One entry per placement, whatever `layers` claims.
  if (m.entries.size() != m.moe_layers.size() * static_cast<size_t>(m.experts)) bad("entries size");
  if (m.moe_layers.empty()) bad("no MoE layer");
  for (size_t i = 0; i < m.moe_layers.size(); ++i)
    if (m.moe_layers[i] < 0 || m.moe_layers[i] >= m.layers || (i && m.moe_layers[i] <= m.moe_layers[i - 1]))
      bad("MoE layers do not rise below layers");
  if (m.drives.empty()) bad("no drive");
  if (m.striped()) {
    if (m.stripe_offsets.size() != m.drives.size() + 1 || m.stripe_offsets.front() != 0 ||
        m.stripe_offsets.back() != m.expert_bytes)
      bad("stripe offsets");
    for (size_t d = 0; d < m.drives.size(); ++d)
      if (m.stripe_bytes(static_cast<int>(d)) == 0) bad("an empty stripe");
  }
  uint64_t at = 0;
  for (const deltafin::RecordPart& p : m.record) {
    if (p.offset != at) bad("record parts not back to back");
    at += p.bytes;
    const std::optional<deltafin::DType> dtype = deltafin::parse_dtype(p.dtype);
    if (!dtype) bad("a record part of an unknown dtype");
    uint64_t bytes = deltafin::dtype_size(*dtype);
    for (uint64_t d : p.shape)
      if (__builtin_mul_overflow(bytes, d, &bytes)) bad("a record part's dtype x shape overflows");
    if (bytes != p.bytes) bad("a record part's bytes are not its dtype x shape");
  }
  if (!m.record.empty() && at != m.expert_bytes) bad("record parts do not cover expert_bytes");
  // A dense layer (the first, if any) reads as empty.
  for (int64_t l = 0; l < m.layers; ++l)
    if (!m.is_moe_layer(l)) {
      if (!m.entry(l, m.experts - 1).drives.empty()) bad("a placement in a dense layer");
      break;
    }
  for (int64_t l : m.moe_layers)
    for (int64_t e = 0; e < m.experts; ++e) {
      const deltafin::ExpertEntry& x = m.entry(l, e);
      if (x.drives.empty()) bad("an expert on no drive");
      std::set<uint16_t> seen;
      for (uint16_t d : x.drives)
        if (d >= m.drives.size() || !seen.insert(d).second) bad("an expert on a missing or repeated drive");
      if (m.striped() && x.stripe_crc32c.size() != m.drives.size()) bad("stripe CRCs");
      if (!x.hash_known && !m.remote) bad("an unknown hash outside a streamed store");
      (void)m.file_on_drive(x.drives.front(), l, e);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<StoreManifest> m;
  try {
    m.emplace(deltafin::parse_store_manifest(text, kFile));
  } catch (const deltafin::Error& e) {
    if (std::string_view(e.what()).find(kFile) == std::string_view::npos)
      bad(std::string("error does not name the file: ") + e.what());
    return 0;
  }
  check_accepted(*m);
  std::string written;
  try {
    written = deltafin::format_store_manifest(*m);
    const StoreManifest back = deltafin::parse_store_manifest(written, kFile);
    if (deltafin::format_store_manifest(back) != written) bad("parse(format(m)) != m:\n" + written);
  } catch (const deltafin::Error& e) {
    bad(std::string("an accepted manifest does not round-trip: ") + e.what() + "\n" + written);
  }
  return 0;
}
