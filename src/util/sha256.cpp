#include "util/sha256.h"

#include <openssl/evp.h>

#include <vector>

#include "util/error.h"
#include "util/file.h"

namespace deltafin {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1)
    fail("OpenSSL: cannot initialise SHA-256");
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(const void* data, size_t size) {
  if (EVP_DigestUpdate(impl_->ctx, data, size) != 1) fail("OpenSSL: SHA-256 update failed");
}

Sha256Digest Sha256::finish() {
  Sha256Digest out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(impl_->ctx, out.data(), &len) != 1 || len != out.size())
    fail("OpenSSL: SHA-256 final failed");
  return out;
}

Sha256Digest sha256(const void* data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.finish();
}

std::string to_hex(const Sha256Digest& digest) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (uint8_t b : digest) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

std::string sha256_file_hex(const std::string& path) {
  File f = File::open_read(path);
  Sha256 h;
  std::vector<uint8_t> buf(4 << 20);
  uint64_t size = f.size(), off = 0;
  while (off < size) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    f.pread_exact(buf.data(), n, off);
    h.update(buf.data(), n);
    off += n;
  }
  return to_hex(h.finish());
}

}  // namespace deltafin
