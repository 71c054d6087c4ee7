// Fault tests' tools: a private copy of a store (its manifest and every
// drive) that a test may damage, and the damages.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "store/store_manifest.h"
#include "support/test_support.h"

namespace deltafin::test {

struct StoreCopy {
  TempDir dir;
  std::string store;
  StoreManifest m;
  explicit StoreCopy(const std::string& src) {
    namespace fs = std::filesystem;
    store = dir.path() + "/store";
    fs::copy(src, store, fs::copy_options::recursive);
    m = load_store_manifest(store);
    for (size_t d = 0; d < m.drives.size(); ++d) {
      const std::string to = dir.path() + "/drive" + std::to_string(d);
      fs::copy(m.drives[d].path, to, fs::copy_options::recursive);
      m.drives[d].path = to;
    }
    save_store_manifest(store, m);
  }
  // Applies `damage` to the primary copy of every expert of layer 1 (some are always used).
  template <class F>
  void damage_layer1_primaries(F damage) {
    for (int64_t e = 0; e < m.experts; ++e) damage(m.expert_path(m.entry(1, e).drives[0], 1, e));
  }
  // Striped stores: to drive d's stripe of every expert of layer 1.
  template <class F>
  void damage_layer1_stripes(int d, F damage) {
    for (int64_t e = 0; e < m.experts; ++e) damage(m.stripe_path(d, 1, e));
  }
};

inline void remove_file(const std::string& p) { std::filesystem::remove(p); }
inline void truncate_file(const std::string& p) { std::filesystem::resize_file(p, std::filesystem::file_size(p) - 1); }
// Flips bits of the byte at offset 100.
inline void flip_byte(const std::string& p) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(100);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(100);
  f.write(&c, 1);
}

}  // namespace deltafin::test
