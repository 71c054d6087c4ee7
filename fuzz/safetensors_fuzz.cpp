// libFuzzer target: safetensors files (format/safetensors.h), the 8-byte
// header length, the JSON header and its checks against the file's size.
//
// The input bytes are a whole .safetensors file. It is opened twice through
// SafetensorsFile::open(ByteSource): once from memory as a local file is
// (size() = the input's size), and once as a mirror that claims a much larger
// file than it sends (size() = 1 TiB, reads past the input's end fail with a
// deltafin::Error, as a range request past a short file does): a header
// length or data offsets that only a lying size allows must not make the
// reader allocate that size. libFuzzer's -malloc_limit_mb (scripts/fuzz.sh)
// turns such an allocation into a crash.
//
// deltafin::Error is the one expected failure, with a message naming the
// file. An accepted file keeps the header's promises: tensors sorted and
// covering the payload back to back without holes or overlaps, each holding
// exactly dtype size x shape bytes (computed without overflow), its absolute
// offset 8 + header length + begin, found by its name; every tensor's bytes
// read back (whole and by range) are the input's bytes at that offset, and a
// range outside a tensor is refused. The source aborts on a read outside
// [0, size()): the reader must never ask for one. Any other exception, crash
// or sanitizer report is a bug.
//
// Run with scripts/fuzz.sh; the seed corpus is fuzz/corpus/safetensors/, the
// dictionary fuzz/safetensors.dict.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "format/safetensors.h"
#include "util/error.h"

namespace {

using deltafin::ByteSource;
using deltafin::SafetensorsFile;
using deltafin::TensorInfo;

[[noreturn]] void bad(const std::string& what) {
  std::fprintf(stderr, "safetensors reader breaks its contract: %s\n", what.c_str());
  std::abort();
}

// The input as a file of `claimed` bytes, of which only the input's exist.
class MemorySource : public ByteSource {
public:
  MemorySource(std::string_view bytes, uint64_t claimed) : bytes_(bytes), claimed_(claimed) {}
  const std::string& name() const override { return name_; }
  uint64_t size() const override { return claimed_; }
  void read(void* dst, size_t n, uint64_t offset) const override {
    if (offset > claimed_ || n > claimed_ - offset)
      bad("read of " + std::to_string(n) + " bytes at " + std::to_string(offset) + " outside the file's size");
    if (offset > bytes_.size() || n > bytes_.size() - offset)
      deltafin::fail(name_, ": bytes ", offset, "-", offset + n, " are not there (the mirror sent less)");
    if (n) std::memcpy(dst, bytes_.data() + offset, n);
  }

private:
  const std::string name_ = "fuzz.safetensors";
  std::string_view bytes_;
  uint64_t claimed_;
};

void check_accepted(const SafetensorsFile& f, std::string_view bytes, bool lying) {
  const uint64_t size = f.file_size();
  if (f.header_length() > size - 8) bad("header beyond the file");
  const uint64_t data_start = 8 + f.header_length(), payload = size - data_start;
  uint64_t covered = 0;
  std::set<std::string> names;
  for (const TensorInfo& t : f.tensors()) {
    if (!names.insert(t.name).second) bad("tensor '" + t.name + "' listed twice");
    if (t.begin != covered) bad("tensor '" + t.name + "' does not start where the one before ends");
    if (t.end < t.begin || t.end > payload) bad("tensor '" + t.name + "' outside the payload");
    covered = t.end;
    uint64_t elements = 1;
    for (uint64_t d : t.shape)
      if (__builtin_mul_overflow(elements, d, &elements)) bad("tensor '" + t.name + "' element count overflows");
    uint64_t need = 0;
    if (__builtin_mul_overflow(elements, deltafin::dtype_size(t.dtype), &need) || need != t.bytes())
      bad("tensor '" + t.name + "' bytes differ from dtype x shape");
    if (t.elements() != elements) bad("elements() differs");
    if (t.file_offset != data_start + t.begin) bad("tensor '" + t.name + "' file offset");
    if (f.find(t.name) != &t) bad("find('" + t.name + "') does not give the tensor");
  }
  if (covered != payload) bad("tensors do not cover the payload");
  if (f.find("\x01not a tensor") && !names.count("\x01not a tensor")) bad("find() of an absent name");

  for (const TensorInfo& t : f.tensors()) {
    const bool present = t.file_offset <= bytes.size() && t.bytes() <= bytes.size() - t.file_offset;
    if (!present) {
      if (!lying) bad("tensor '" + t.name + "' beyond the real file was accepted");
      continue;  // the mirror would be asked for it; bounded by the real input here
    }
    std::vector<uint8_t> whole(t.bytes());
    f.read(t, whole.data());
    if (t.bytes() && std::memcmp(whole.data(), bytes.data() + t.file_offset, t.bytes()) != 0)
      bad("tensor '" + t.name + "' read back other bytes");
    if (t.bytes() >= 2) {
      uint8_t part[1];
      f.read_range(t, t.bytes() - 1, 1, part);
      if (part[0] != whole.back()) bad("read_range of the last byte differs");
    }
    try {
      uint8_t part[2];
      f.read_range(t, t.bytes(), 1, part);
      bad("read_range past the tensor's end was not refused");
    } catch (const deltafin::Error&) {
    }
    try {
      uint8_t part[2];
      f.read_range(t, 1, UINT64_MAX, part);
      bad("read_range of an overflowing length was not refused");
    } catch (const deltafin::Error&) {
    }
  }
}

void open_and_check(std::string_view bytes, uint64_t claimed) {
  const bool lying = claimed != bytes.size();
  std::optional<SafetensorsFile> f;
  try {
    f.emplace(SafetensorsFile::open(std::make_unique<MemorySource>(bytes, claimed)));
  } catch (const deltafin::Error& e) {
    const std::string_view message = e.what();
    if (message.find("fuzz.safetensors") == std::string_view::npos)
      bad("error does not name the file: " + std::string(message));
    return;
  }
  try {
    check_accepted(*f, bytes, lying);
  } catch (const deltafin::Error& e) {
    bad(std::string("an accepted file failed to read: ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  open_and_check(bytes, bytes.size());
  open_and_check(bytes, uint64_t{1} << 40);
  return 0;
}
