#include "remote/remote_file_source.h"

#include "util/error.h"

namespace deltafin {

RemoteFileSource::RemoteFileSource(std::shared_ptr<HttpClient> client, std::shared_ptr<std::mutex> client_mutex,
                                   std::string url, uint64_t bytes, std::string etag)
    : client_(std::move(client)), mutex_(std::move(client_mutex)), url_(std::move(url)), bytes_(bytes),
      etag_(std::move(etag)) {}

void RemoteFileSource::read(void* dst, size_t n, uint64_t offset) const {
  if (n == 0) return;
  if (offset > bytes_ || n > bytes_ - offset)
    fail(url_, ": range [", offset, ", ", offset + n, ") is outside the file's ", bytes_, " bytes");
  // Large tensors (K3's embedding is 2.3 GB) come in pieces, so a failed
  // attempt repeats at most one piece.
  constexpr uint64_t kPiece = 64ull << 20;
  std::lock_guard<std::mutex> g(*mutex_);
  for (uint64_t done = 0; done < n;) {
    const uint64_t k = std::min<uint64_t>(kPiece, n - done);
    client_->get_range(url_, offset + done, k, static_cast<uint8_t*>(dst) + done, etag_, bytes_);
    done += k;
  }
}

}  // namespace deltafin
