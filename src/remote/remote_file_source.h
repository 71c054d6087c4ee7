// A checkpoint file on a mirror, read by HTTP range requests: lets the one
// safetensors/checkpoint loader (src/format) read a remote checkpoint's
// headers and spine tensors during setup --stream. Reads are serialised on
// one keep-alive connection (setup reads tensors one after another).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "format/byte_source.h"
#include "remote/http_client.h"

namespace deltafin {

class RemoteFileSource : public ByteSource {
public:
  // url: the file's full URL; bytes and etag: what HEAD said at setup.
  RemoteFileSource(std::shared_ptr<HttpClient> client, std::shared_ptr<std::mutex> client_mutex, std::string url,
                   uint64_t bytes, std::string etag);
  const std::string& name() const override { return url_; }
  uint64_t size() const override { return bytes_; }
  void read(void* dst, size_t n, uint64_t offset) const override;

private:
  std::shared_ptr<HttpClient> client_;
  std::shared_ptr<std::mutex> mutex_;
  std::string url_;
  uint64_t bytes_;
  std::string etag_;
};

}  // namespace deltafin
