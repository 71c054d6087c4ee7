#include "store/hash_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "platform/files.h"
#include "store/install.h"
#include "store/store_manifest.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {

constexpr size_t kSlotBytes = 48;
constexpr uint32_t kMagic = 0x31484644;  // "DFH1" little-endian

uint32_t get_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // the file is little-endian, like every machine this builds for
  return v;
}
void put_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

}  // namespace

std::string HashJournal::path(const std::string& store_dir) { return store_dir + "/remote/hashes.bin"; }

namespace {

std::vector<int64_t> layers_from_one(int64_t layers) {
  std::vector<int64_t> out;
  for (int64_t l = 1; l < layers; ++l) out.push_back(l);
  return out;
}

}  // namespace

HashJournal::HashJournal(const std::string& store_dir, int64_t layers, int64_t experts, Mode mode)
    : HashJournal(store_dir, layers_from_one(layers), experts, mode) {}

HashJournal::HashJournal(const std::string& store_dir, std::vector<int64_t> moe_layers, int64_t experts, Mode mode)
    : path_(path(store_dir)), moe_layers_(std::move(moe_layers)), experts_(experts) {
  slot_of_layer_ = moe_layer_positions(moe_layers_, moe_layers_.empty() ? 0 : moe_layers_.back() + 1, path_);
  const size_t count = moe_layers_.size() * static_cast<size_t>(experts);
  const uint64_t want = count * kSlotBytes;
  slots_.resize(count);
  if (mode == Mode::ReadOnly && !file_exists(path_)) return;
  if (!file_exists(path_)) {
    std::filesystem::create_directories(store_dir + "/remote");
    const StoreWriteLock lock(store_dir);  // (store/install.h: while its temporary exists)
    if (!lock.held())
      fail(path_, ": cannot be created now: a deltafin setup is rewriting the store (", store_lock_path(store_dir),
           " is held); run again once it has finished");
    write_file_atomic(path_, std::string(want, '\0'));
  }
  if (mode == Mode::ReadWrite) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    if (fd_ < 0) fail(path_, ": cannot open for writing: ", std::strerror(errno));
  }
  std::string bytes;
  try {
    bytes = read_text_file(path_);
  } catch (...) {
    if (fd_ >= 0) ::close(fd_);
    throw;
  }
  if (bytes.size() != want) {
    if (fd_ >= 0) ::close(fd_);
    fail(path_, ": ", bytes.size(), " bytes, expected ", want, " (", count,
         " slots of 48 bytes); the file does not belong to this store");
  }
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* s = reinterpret_cast<const uint8_t*>(bytes.data()) + i * kSlotBytes;
    bool empty = true;
    for (size_t k = 0; k < kSlotBytes && empty; ++k) empty = s[k] == 0;
    if (empty) continue;
    if (get_u32(s) != kMagic || get_u32(s + 44) != crc32c(s, 44)) {
      damaged_.push_back(cat("layer ", moe_layers_[i / static_cast<size_t>(experts)], " expert ",
                             static_cast<int64_t>(i) % experts));
      continue;
    }
    ExpertHash h;
    h.crc32c = get_u32(s + 4);
    std::memcpy(h.sha256.data(), s + 8, 32);
    slots_[i] = h;
  }
}

HashJournal::~HashJournal() {
  if (fd_ >= 0) ::close(fd_);
}

size_t HashJournal::slot(int64_t layer, int64_t expert) const {
  if (layer < 0 || static_cast<size_t>(layer) >= slot_of_layer_.size() || slot_of_layer_[static_cast<size_t>(layer)] < 0 ||
      expert < 0 || expert >= experts_)
    fail(path_, ": no slot for (layer ", layer, ", expert ", expert, ")");
  return static_cast<size_t>(slot_of_layer_[static_cast<size_t>(layer)] * experts_ + expert);
}

std::optional<ExpertHash> HashJournal::get(int64_t layer, int64_t expert) const {
  const size_t i = slot(layer, expert);
  std::lock_guard<std::mutex> g(mutex_);
  return slots_[i];
}

size_t HashJournal::known() const {
  std::lock_guard<std::mutex> g(mutex_);
  size_t n = 0;
  for (const auto& s : slots_) n += s.has_value();
  return n;
}

void HashJournal::record(int64_t layer, int64_t expert, const ExpertHash& h) {
  const size_t i = slot(layer, expert);
  if (fd_ < 0) fail(path_, ": opened read-only; cannot record the hash of layer ", layer, " expert ", expert);
  std::lock_guard<std::mutex> g(mutex_);
  if (slots_[i]) {
    if (slots_[i]->sha256 != h.sha256 || slots_[i]->crc32c != h.crc32c)
      fail(path_, ": layer ", layer, " expert ", expert, ": a different hash is already recorded (",
           to_hex(slots_[i]->sha256), ")");
    return;
  }
  uint8_t s[kSlotBytes] = {};
  put_u32(s, kMagic);
  put_u32(s + 4, h.crc32c);
  std::memcpy(s + 8, h.sha256.data(), 32);
  put_u32(s + 44, crc32c(s, 44));
  const off_t at = static_cast<off_t>(i * kSlotBytes);
  if (::pwrite(fd_, s, kSlotBytes, at) != static_cast<ssize_t>(kSlotBytes))
    fail(path_, ": cannot record the hash of layer ", layer, " expert ", expert, ": ", std::strerror(errno));
  if (platform::sync_data(fd_) != 0) fail(path_, ": ", platform::sync_data_name(), ": ", std::strerror(errno));
  slots_[i] = h;
}

}  // namespace deltafin
