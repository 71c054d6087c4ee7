// SHA-256 through OpenSSL's EVP interface: incremental for large streams
// (expert records, shards) and one-shot for small buffers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace deltafin {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  Sha256Digest finish();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

Sha256Digest sha256(const void* data, size_t size);
std::string to_hex(const Sha256Digest& digest);
// Hash of a whole file, read in bounded chunks.
std::string sha256_file_hex(const std::string& path);

}  // namespace deltafin
