#include "engine/prompt_disk_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "util/crc32c.h"
#include "util/error.h"
#include "util/file.h"
#include "util/sha256.h"

namespace deltafin {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'D', 'F', 'P', 'S', 'T', 'A', 'T', 'E'};
constexpr size_t kHeaderBytes = 128;
constexpr const char* kSuffix = ".state";

// Header layout (little-endian): magic[8], u32 version, u32 0, fingerprint
// (64 hex chars), u64 length, u64 payload bytes, u32 payload CRC-32C,
// zeros up to byte 124, u32 CRC-32C of bytes 0..123.
struct Header {
  uint32_t version = 0;
  std::string fingerprint;
  uint64_t length = 0, payload_bytes = 0;
  uint32_t payload_crc = 0;
};

template <typename T>
void put_at(uint8_t* p, size_t at, T v) {
  std::memcpy(p + at, &v, sizeof v);
}
template <typename T>
T get_at(const uint8_t* p, size_t at) {
  T v;
  std::memcpy(&v, p + at, sizeof v);
  return v;
}

std::vector<uint8_t> encode_header(const Header& h) {
  std::vector<uint8_t> b(kHeaderBytes, 0);
  std::memcpy(b.data(), kMagic, 8);
  put_at<uint32_t>(b.data(), 8, h.version);
  std::memcpy(b.data() + 16, h.fingerprint.data(), std::min<size_t>(64, h.fingerprint.size()));
  put_at<uint64_t>(b.data(), 80, h.length);
  put_at<uint64_t>(b.data(), 88, h.payload_bytes);
  put_at<uint32_t>(b.data(), 96, h.payload_crc);
  put_at<uint32_t>(b.data(), 124, crc32c(b.data(), 124));
  return b;
}

void touch(const std::string& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

bool pid_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

}  // namespace

PromptDiskCache::PromptDiskCache(std::string dir, uint64_t budget_bytes, std::string fingerprint, const CausalModel& model)
    : dir_(std::move(dir)), budget_(budget_bytes), fingerprint_(std::move(fingerprint)), model_(model) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) fail("prompt cache: cannot create ", dir_, ": ", ec.message());
  // Prompt states hold a conversation's tokens: this user's only (issue 37).
  // The directory too, so their names (prefix hashes) are not listed to others.
  if (::chmod(dir_.c_str(), 0700) != 0) fail("prompt cache: cannot make ", dir_, " private (0700): ", std::strerror(errno));
  if (fingerprint_.size() != 64) fail("prompt cache: the model fingerprint must be 64 hex characters");
  // Temporaries of writers that are gone (a crash, kill -9) are removed.
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    const size_t tmp = name.find(".tmp-");
    if (tmp != std::string::npos && !pid_alive(std::atol(name.c_str() + tmp + 5))) {
      fs::remove(e.path(), ec);
    } else if (tmp == std::string::npos && name.size() > 6 && name.ends_with(kSuffix)) {
      // States written before they were private are made so.
      if (::chmod(e.path().c_str(), kPrivateFile) != 0)
        fail("prompt cache: cannot make ", e.path().string(), " private (0600): ", std::strerror(errno));
      stats_.bytes += e.file_size(ec);
    }
  }
}

int64_t PromptDiskCache::save_point(int64_t n) { return n > 0 ? (n - 1) / kBlock * kBlock : 0; }

std::vector<std::string> PromptDiskCache::chain(std::span<const uint32_t> tokens, int64_t blocks,
                                                const std::string& scope) const {
  std::vector<std::string> names;
  // A scope goes into the chain's seed, so its names are its own; the shared
  // scope keeps the names of the states written before scopes existed.
  std::string seed = cat("deltafin prompt state v", kFormatVersion, "\n", fingerprint_);
  if (!scope.empty()) seed += cat("\nscope ", scope);
  Sha256Digest h = sha256(seed.data(), seed.size());
  for (int64_t k = 0; k < blocks; ++k) {
    Sha256 s;
    s.update(h.data(), h.size());
    s.update(tokens.data() + k * kBlock, kBlock * sizeof(uint32_t));  // u32 little-endian, as held
    h = s.finish();
    names.push_back(dir_ + "/" + to_hex(h) + kSuffix);
  }
  return names;
}

std::string PromptDiskCache::path_for(std::span<const uint32_t> tokens, int64_t blocks, const std::string& scope) const {
  return chain(tokens, blocks, scope).back();
}

int64_t PromptDiskCache::available(std::span<const uint32_t> prompt, int64_t more_than, const std::string& scope) const {
  const int64_t blocks = save_point(static_cast<int64_t>(prompt.size())) / kBlock;
  if (blocks == 0) return 0;
  const std::vector<std::string> names = chain(prompt, blocks, scope);
  for (int64_t k = blocks; k >= 1 && k * kBlock > more_than; --k)
    if (file_exists(names[static_cast<size_t>(k - 1)])) return k * kBlock;
  return 0;
}

PromptDiskCache::Restored PromptDiskCache::restore(std::span<const uint32_t> prompt, int64_t more_than,
                                                  const std::string& scope) {
  const int64_t blocks = save_point(static_cast<int64_t>(prompt.size())) / kBlock;
  if (blocks == 0) return {};
  const std::vector<std::string> names = chain(prompt, blocks, scope);
  for (int64_t k = blocks; k >= 1 && k * kBlock > more_than; --k) {
    const std::string& path = names[static_cast<size_t>(k - 1)];
    if (!file_exists(path)) continue;
    // A fresh session per file tried: one that proves bad is dropped whole.
    std::unique_ptr<ModelSession> session = model_.new_session();
    if (load(path, prompt, k * kBlock, *session)) {
      mark_used(path);
      stats_.hits++;
      return {std::move(session), k * kBlock};
    }
  }
  return {};
}

void PromptDiskCache::reject(const std::string& path, const std::string& why) {
  std::fprintf(stderr, "prompt cache: ignoring %s: %s (removed; the prompt is computed instead)\n", path.c_str(),
               why.c_str());
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (fs::remove(path, ec) && stats_.bytes >= size) stats_.bytes -= size;
  forget(path);
  stats_.rejected++;
}

bool PromptDiskCache::load(const std::string& path, std::span<const uint32_t> prompt, int64_t length, ModelSession& session) {
  File f;
  try {
    f = File::open_read(path);
  } catch (const Error& e) {  // unreadable now (out of descriptors, I/O): skipped, not judged
    std::fprintf(stderr, "prompt cache: cannot read %s now, computing the prompt: %s\n", path.c_str(), e.what());
    return false;
  }
  try {
    const uint64_t size = f.size();
    if (size < kHeaderBytes) return reject(path, cat("truncated: ", size, " bytes, not even the header")), false;
    std::vector<uint8_t> head(kHeaderBytes);
    f.pread_exact(head.data(), kHeaderBytes, 0);
    if (std::memcmp(head.data(), kMagic, 8) != 0) return reject(path, "not a deltafin prompt state"), false;
    if (get_at<uint32_t>(head.data(), 124) != crc32c(head.data(), 124))
      return reject(path, "its header is corrupt (CRC-32C mismatch)"), false;
    Header h;
    h.version = get_at<uint32_t>(head.data(), 8);
    h.fingerprint.assign(reinterpret_cast<const char*>(head.data() + 16), 64);
    h.length = get_at<uint64_t>(head.data(), 80);
    h.payload_bytes = get_at<uint64_t>(head.data(), 88);
    h.payload_crc = get_at<uint32_t>(head.data(), 96);
    if (h.version != kFormatVersion)
      return reject(path, cat("format version ", h.version, "; this deltafin reads version ", kFormatVersion)), false;
    if (h.fingerprint != fingerprint_)
      return reject(path, cat("it is from another model or build of the weights (fingerprint ", h.fingerprint.substr(0, 16),
                              "..., this model's ", fingerprint_.substr(0, 16), "...)")),
             false;
    if (h.length != static_cast<uint64_t>(length))
      return reject(path, cat("it holds ", h.length, " positions, its name says ", length)), false;
    const uint64_t want = static_cast<uint64_t>(length) * 4 + model_.state_values(length) * 4;
    if (h.payload_bytes != want)
      return reject(path, cat("its payload is ", h.payload_bytes, " bytes; ", length, " positions are ", want)), false;
    if (size != kHeaderBytes + want)
      return reject(path, cat("truncated or padded: ", size, " bytes, expected ", kHeaderBytes + want)), false;
    // Read straight into the session (no second copy of a state that can be
    // gigabytes), the CRC folded in as the parts arrive; checked at the end.
    std::vector<uint32_t> tokens(static_cast<size_t>(length));
    f.pread_exact(tokens.data(), tokens.size() * 4, kHeaderBytes);
    uint32_t crc = crc32c(tokens.data(), tokens.size() * 4);
    uint64_t at = kHeaderBytes + tokens.size() * 4;
    model_.read_state(session, length, [&](float* dst, size_t n) {
      f.pread_exact(dst, n * 4, at);
      crc = crc32c(dst, n * 4, crc);
      at += n * 4;
    });
    if (crc != h.payload_crc) return reject(path, "its contents are corrupt (CRC-32C mismatch)"), false;
    if (!std::equal(tokens.begin(), tokens.end(), prompt.begin()))
      return reject(path, "its tokens differ from the prompt's (a hash collision)"), false;
    return true;
  } catch (const std::exception& e) {
    reject(path, e.what());
    return false;
  }
}

void PromptDiskCache::save(std::span<const uint32_t> tokens, const SessionMark& at, const ModelSession& session,
                           const std::string& scope) {
  const int64_t length = at.length;
  if (length <= 0 || length % kBlock != 0 || static_cast<int64_t>(tokens.size()) < length) return;
  try {
    const std::string path = path_for(tokens, length / kBlock, scope);
    if (file_exists(path)) {
      mark_used(path);
      return;
    }
    const uint64_t payload_bytes = static_cast<uint64_t>(length) * 4 + model_.state_values(length) * 4;
    if (kHeaderBytes + payload_bytes > budget_) return;  // larger than the whole budget: never kept
    // Two passes over the state, no copy of it: the CRC, then the bytes.
    const size_t token_bytes = static_cast<size_t>(length) * 4;
    uint32_t crc = crc32c(tokens.data(), token_bytes);
    model_.for_each_state_part(session, at, [&](const float* p, size_t n) { crc = crc32c(p, n * 4, crc); });
    Header h;
    h.version = kFormatVersion;
    h.fingerprint = fingerprint_;
    h.length = static_cast<uint64_t>(length);
    h.payload_bytes = payload_bytes;
    h.payload_crc = crc;
    const std::vector<uint8_t> head = encode_header(h);
    AtomicFile out(path, kPrivateFile);
    out.write(head.data(), head.size());
    out.write(tokens.data(), token_bytes);
    model_.for_each_state_part(session, at, [&](const float* p, size_t n) { out.write(p, n * 4); });
    if (const char* pause = std::getenv("DELTAFIN_TEST_PROMPT_STATE_PAUSE_MS")) {  // tests: a kill -9 mid-write
      std::fprintf(stderr, "prompt cache: writing %s\n", path.c_str());
      std::fflush(stderr);
      ::usleep(static_cast<useconds_t>(std::atol(pause)) * 1000);
    }
    out.commit();
    mark_used(path);
    stats_.writes++;
    stats_.bytes += kHeaderBytes + payload_bytes;
    enforce_budget(path);
  } catch (const std::exception& e) {  // a full disk, an I/O error, no memory: the reuse is lost, nothing else
    std::fprintf(stderr, "prompt cache: could not keep the state of %lld positions: %s\n", static_cast<long long>(length),
                 e.what());
  }
}

// Keyed by file name: the directory is spelled one way in the paths made
// here and another in those the directory listing gives back.
void PromptDiskCache::mark_used(const std::string& path) {
  touch(path);
  last_use_[fs::path(path).filename().string()] = ++uses_;
}

void PromptDiskCache::forget(const std::string& path) { last_use_.erase(fs::path(path).filename().string()); }

// Least recently used first, never `keep`: files untouched since this cache
// opened by mtime, then the others in the order this cache last used them.
void PromptDiskCache::enforce_budget(const std::string& keep) {
  struct Kept {
    uint64_t use;  // 0: not used since opening
    fs::file_time_type mtime;
    uint64_t bytes;
    std::string path;
    bool operator<(const Kept& o) const { return use != o.use ? use < o.use : mtime < o.mtime; }
  };
  const std::string keep_name = fs::path(keep).filename().string();
  std::vector<Kept> files;
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    if (!name.ends_with(kSuffix) || name.find(".tmp-") != std::string::npos) continue;
    const uint64_t bytes = e.file_size(ec);
    const auto use = last_use_.find(name);
    files.push_back({use == last_use_.end() ? 0 : use->second, e.last_write_time(ec), bytes, e.path().string()});
    total += bytes;
  }
  std::sort(files.begin(), files.end());
  for (const Kept& f : files) {
    if (total <= budget_) break;
    if (fs::path(f.path).filename() == keep_name) continue;
    if (fs::remove(f.path, ec)) {
      total -= f.bytes;
      forget(f.path);
      stats_.evicted++;
    }
  }
  stats_.bytes = total;
}

}  // namespace deltafin
