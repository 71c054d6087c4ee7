// Where a checkpoint file's bytes come from. Local files are read with pread;
// setup --stream reads the same safetensors shards from an HTTP mirror by
// range requests (src/remote), so the one checkpoint loader (header checks,
// binding, spine conversion) serves both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "util/file.h"

namespace deltafin {

class ByteSource {
public:
  virtual ~ByteSource() = default;
  virtual const std::string& name() const = 0;  // path or URL, for messages
  virtual uint64_t size() const = 0;
  // Exactly n bytes at offset into dst, or throws naming name() and the range.
  // May be called from several threads at once.
  virtual void read(void* dst, size_t n, uint64_t offset) const = 0;
};

class LocalFileSource : public ByteSource {
public:
  explicit LocalFileSource(const std::string& path) : file_(File::open_read(path)), size_(file_.size()) {}
  const std::string& name() const override { return file_.path(); }
  uint64_t size() const override { return size_; }
  void read(void* dst, size_t n, uint64_t offset) const override { file_.pread_exact(dst, n, offset); }

private:
  File file_;
  uint64_t size_;
};

// Opens a checkpoint file by its name in the checkpoint ("model-00001-of-000003.safetensors").
using ShardOpener = std::function<std::unique_ptr<ByteSource>(const std::string& name)>;

}  // namespace deltafin
