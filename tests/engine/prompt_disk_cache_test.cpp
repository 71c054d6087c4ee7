// Prompt states on disk (engine/prompt_disk_cache.h): a restored state
// equals the computed one bit for bit (session and the logits that follow),
// any prompt sharing the prefix finds it, and every kind of bad file — a
// flipped byte, a truncated file, a corrupt header, a file of another model,
// each header field wrong alone in an otherwise sealed file — is ignored with
// a warning naming what was wrong and removed, never used; the disk budget evicts
// the least recently used. (The kill -9 and restarted-server cases drive the
// binary: tests/server/prompt_state_process_test.cpp.)
#include "engine/prompt_disk_cache.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "model/kimi_k3/load/loaded_k3.h"
#include "model/qwen3_moe/load/loaded_qwen3_moe.h"
#include "engine/prefill.h"
#include "model/common/greedy.h"
#include "model/kimi_k3/session_file.h"
#include "support/family_model.h"
#include "support/session_compare.h"
#include "support/test_support.h"
#include "util/crc32c.h"

using namespace deltafin;
namespace fs = std::filesystem;
using test::expect_same_session;
using test::same_bits;

namespace {

constexpr int64_t B = PromptDiskCache::kBlock;

// Every test runs on a tiny model of each target family.
class PromptDiskCacheTest : public ::testing::TestWithParam<std::string> {
protected:
  LoadedModel& lm() { return test::shared_family_model(GetParam(), 8); }
  CausalModel& model() { return lm().causal(); }
  std::unique_ptr<ModelSession> fresh() { return model().new_session(); }

  std::vector<uint32_t> prompt_of(uint64_t seed, size_t n) {
    return test::random_tokens(seed, n, static_cast<uint32_t>(model().summary().vocab));
  }

  // Bytes of the state of L positions, from the families' definitions: K3's
  // session file layout (KDA state + latent rows); a Qwen3 K/V cache (per
  // layer, L rows of keys and of values, KV heads x head_dim fp32 each).
  uint64_t state_bytes(int64_t L) {
    if (auto* k3 = dynamic_cast<LoadedK3*>(&lm())) return session_state_bytes(k3->config, L);
    const Qwen3Config& c = dynamic_cast<LoadedQwen3Moe&>(lm()).config.base;
    return static_cast<uint64_t>(c.num_hidden_layers) * 2 * static_cast<uint64_t>(c.num_key_value_heads * c.head_dim) *
           4 * static_cast<uint64_t>(L);
  }

  // Prefills tokens[0, L) into a fresh session and keeps it in `cache`.
  void keep(PromptDiskCache& cache, const std::vector<uint32_t>& tokens, int64_t L) {
    auto s = fresh();
    prefill(model(), *s, std::span(tokens).first(static_cast<size_t>(L)), 64);
    cache.save(tokens, *model().mark(*s), *s);
  }
};

const std::string kFingerprint(64, 'a');

// The only kept file in `dir`.
std::string only_file(const std::string& dir) {
  std::string found;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".state") found = e.path().string(), ++n;
  EXPECT_EQ(n, 1);
  return found;
}

// Every kept file in `dir`.
std::vector<std::string> state_files(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".state") found.push_back(e.path().string());
  return found;
}

// Sets a file's access and modification times to `seconds` after the epoch.
void set_mtime(const std::string& path, time_t seconds) {
  const timespec t[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0) << path;
}

void flip_byte_at(const std::string& path, uint64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&c, 1);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put_u32(std::string& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put_u64(std::string& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

// Applies `edit` to a kept file's bytes and seals them again as a writer
// would, so that only the edited field is wrong: the payload's CRC-32C
// (bytes 96..99, over everything after the 128-byte header) when
// `reseal_payload`, then the header's (bytes 124..127, over bytes 0..123).
// The layout is the one prompt_disk_cache.cpp documents.
void craft(const std::string& path, const std::function<void(std::string&)>& edit, bool reseal_payload = false) {
  std::string b = file_bytes(path);
  edit(b);
  if (reseal_payload) put_u32(b, 96, crc32c(b.data() + 128, b.size() - 128));
  put_u32(b, 124, crc32c(b.data(), 124));
  test::write_bytes(path, b);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Families, PromptDiskCacheTest, ::testing::ValuesIn(test::target_families()), test::family_name);

TEST(PromptDiskCache, SavePointIsTheLastWholeBlockBeforeTheLastToken) {
  EXPECT_EQ(PromptDiskCache::save_point(0), 0);
  EXPECT_EQ(PromptDiskCache::save_point(B), 0);  // the last token must still run
  EXPECT_EQ(PromptDiskCache::save_point(B + 1), B);
  EXPECT_EQ(PromptDiskCache::save_point(3 * B), 2 * B);
  EXPECT_EQ(PromptDiskCache::save_point(3 * B + 7), 3 * B);
}

TEST_P(PromptDiskCacheTest, ARestoredStateEqualsTheComputedOneAndSoDoesWhatFollows) {
  test::TempDir d;
  const std::vector<uint32_t> prompt = prompt_of(1, 2 * B + 40);
  PromptDiskCache cache(d.path(), 1ull << 30, kFingerprint, model());
  keep(cache, prompt, 2 * B);
  EXPECT_EQ(cache.stats().writes, 1);
  EXPECT_EQ(fs::file_size(only_file(d.path())), 128 + 2 * B * 4 + state_bytes(2 * B));

  // A new cache over the same directory (a restart) finds it.
  PromptDiskCache again(d.path(), 1ull << 30, kFingerprint, model());
  EXPECT_EQ(again.available(prompt, 0), 2 * B);
  PromptDiskCache::Restored r = again.restore(prompt, 0);
  ASSERT_EQ(r.length, 2 * B);
  ASSERT_TRUE(r.session);
  ModelSession& restored = *r.session;
  EXPECT_EQ(again.stats().hits, 1);
  auto cold_session = fresh();
  ModelSession& cold = *cold_session;
  prefill(model(), cold, std::span(prompt).first(2 * B), 0);
  expect_same_session(restored, cold, "restored");
  // The rest of the prompt and a few decode steps give the same bits.
  const auto rest = std::span(prompt).subspan(2 * B);
  Rows a = prefill(model(), restored, rest, 64);
  Rows b = prefill(model(), cold, rest, 64);
  EXPECT_TRUE(same_bits(a.v, b.v));
  for (int step = 0; step < 4; ++step) {
    const uint32_t next[1] = {argmax_first(a.row(0), a.n)};
    a = model().forward(restored, next, false);
    b = model().forward(cold, next, false);
    ASSERT_TRUE(same_bits(a.v, b.v)) << "decode step " << step;
  }
  expect_same_session(restored, cold, "after decoding");
}

// Prompt states hold a conversation's tokens: readable by this user only
// (0600 in a 0700 directory) whatever the umask, and a state written before
// that rule is made private when the cache opens the directory (issue 37).
TEST_P(PromptDiskCacheTest, StatesAreReadableByTheirUserOnly) {
  test::TempDir d;
  const std::string dir = d.path() + "/states";
  const mode_t old_mask = ::umask(022);  // the usual umask: 0644 files, 0755 directories
  {
    PromptDiskCache cache(dir, 1ull << 30, kFingerprint, model());
    keep(cache, prompt_of(3, B + 8), B);
  }
  const std::string state = only_file(dir);
  struct stat st {};
  ASSERT_EQ(::stat(state.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << state;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  // A state left world-readable by an older build, and the directory opened up.
  ASSERT_EQ(::chmod(state.c_str(), 0644), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  const std::string other = dir + "/notes.txt";  // not a state: left as it is
  std::ofstream(other) << "x";
  ASSERT_EQ(::chmod(other.c_str(), 0644), 0);
  { PromptDiskCache again(dir, 1ull << 30, kFingerprint, model()); }
  ::umask(old_mask);
  ASSERT_EQ(::stat(state.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(other.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_P(PromptDiskCacheTest, AnyPromptSharingTheBlocksFindsTheLongestKeptPrefix) {
  test::TempDir d;
  PromptDiskCache cache(d.path(), 1ull << 30, kFingerprint, model());
  const std::vector<uint32_t> a = prompt_of(2, 3 * B + 5);
  keep(cache, a, B);
  keep(cache, a, 3 * B);
  // Shares 2 blocks and a bit with a: only the 1-block state applies.
  std::vector<uint32_t> b(a.begin(), a.begin() + 2 * B + 10);
  b.push_back(7);
  for (int i = 0; i < 300; ++i) b.push_back(static_cast<uint32_t>(11 + i % 50));
  EXPECT_EQ(cache.available(b, 0), B);
  EXPECT_EQ(cache.available(a, 0), 3 * B);
  EXPECT_EQ(cache.available(a, 3 * B), 0);  // nothing longer than what the caller has
  // A prompt of exactly 3 blocks: the 3-block state would leave no token to run.
  EXPECT_EQ(cache.available(std::span(a).first(3 * B), 0), B);
  // A different first token: nothing.
  std::vector<uint32_t> other = a;
  other[0] ^= 1;
  EXPECT_EQ(cache.available(other, 0), 0);
  PromptDiskCache::Restored r = cache.restore(b, 0);
  EXPECT_EQ(r.length, B);
  ASSERT_TRUE(r.session);
  EXPECT_EQ(r.session->length(), B);
}

TEST_P(PromptDiskCacheTest, BadFilesAreIgnoredWithAWarningAndRemoved) {
  const std::vector<uint32_t> prompt = prompt_of(3, B + 3);
  struct Damage {
    const char* what;
    std::function<void(const std::string&)> apply;
    const char* warning;
  };
  const std::vector<Damage> cases = {
      {"a flipped payload byte", [](const std::string& p) { flip_byte_at(p, fs::file_size(p) - 10); }, "contents are corrupt"},
      {"a flipped token byte", [](const std::string& p) { flip_byte_at(p, 130); }, "contents are corrupt"},
      {"a flipped header byte", [](const std::string& p) { flip_byte_at(p, 85); }, "header is corrupt"},
      {"a truncated file", [](const std::string& p) { fs::resize_file(p, fs::file_size(p) - 100); }, "truncated"},
      {"a truncated header", [](const std::string& p) { fs::resize_file(p, 60); }, "not even the header"},
      {"an empty file", [](const std::string& p) { fs::resize_file(p, 0); }, "not even the header"},
      // Each header field wrong alone, the file otherwise sealed as valid.
      {"another magic", [](const std::string& p) { craft(p, [](std::string& b) { b[7] = 'X'; }); },
       "not a deltafin prompt state"},
      {"a later format version", [](const std::string& p) { craft(p, [](std::string& b) { put_u32(b, 8, 2); }); },
       "format version 2; this deltafin reads version 1"},
      {"another model's fingerprint",
       [](const std::string& p) { craft(p, [](std::string& b) { b.replace(16, 64, std::string(64, 'b')); }); },
       "another model or build of the weights (fingerprint bbbbbbbbbbbbbbbb..., this model's aaaaaaaaaaaaaaaa...)"},
      {"a length other than its name's",
       [](const std::string& p) { craft(p, [](std::string& b) { put_u64(b, 80, 2 * B); }); },
       "it holds 512 positions, its name says 256"},
      {"a payload size other than the state's",
       [](const std::string& p) { craft(p, [](std::string& b) { put_u64(b, 88, b.size() - 128 + 4); }); },
       "bytes; 256 positions are "},
      {"a payload CRC that does not match",
       [](const std::string& p) { craft(p, [](std::string& b) { b[96] ^= 1; }); }, "contents are corrupt"},
      {"a padded file", [](const std::string& p) { std::ofstream(p, std::ios::app | std::ios::binary) << 'x'; },
       "truncated or padded"},
      {"other tokens under its name",
       [](const std::string& p) { craft(p, [](std::string& b) { b[128] ^= 1; }, /*reseal_payload=*/true); },
       "its tokens differ from the prompt's"},
  };
  // One state computed and kept; each case damages a copy of it in a directory of its own.
  test::TempDir original;
  {
    PromptDiskCache cache(original.path(), 1ull << 30, kFingerprint, model());
    keep(cache, prompt, B);
  }
  const std::string kept = only_file(original.path());
  for (const Damage& d : cases) {
    SCOPED_TRACE(d.what);
    test::TempDir dir;
    const std::string path = dir.path() + "/" + fs::path(kept).filename().string();
    fs::copy_file(kept, path);
    d.apply(path);
    PromptDiskCache cache(dir.path(), 1ull << 30, kFingerprint, model());
    testing::internal::CaptureStderr();
    PromptDiskCache::Restored r = cache.restore(prompt, 0);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(r.length, 0);
    EXPECT_FALSE(r.session);
    EXPECT_NE(err.find("ignoring " + path), std::string::npos) << err;
    EXPECT_NE(err.find(d.warning), std::string::npos) << err;
    EXPECT_NE(err.find("(removed; the prompt is computed instead)"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(cache.stats().rejected, 1);
  }
}

TEST_P(PromptDiskCacheTest, AStateOfAnotherModelIsNeverUsed) {
  const std::vector<uint32_t> prompt = prompt_of(4, B + 3);
  test::TempDir mine, theirs;
  PromptDiskCache ours(mine.path(), 1ull << 30, kFingerprint, model());
  PromptDiskCache other(theirs.path(), 1ull << 30, std::string(64, 'b'), model());
  keep(ours, prompt, B);
  keep(other, prompt, B);
  // Their file under the name ours looks up (a copied directory, say).
  const std::string path = only_file(mine.path());
  fs::copy_file(only_file(theirs.path()), path, fs::copy_options::overwrite_existing);
  testing::internal::CaptureStderr();
  EXPECT_EQ(ours.restore(prompt, 0).length, 0);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("another model"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(path));
}

TEST_P(PromptDiskCacheTest, TheDiskBudgetEvictsTheLeastRecentlyUsed) {
  const uint64_t one = 128 + B * 4 + state_bytes(B);
  // The directory spelled both ways: the cache's own paths and the
  // directory listing's must name the same files.
  for (const bool slash : {false, true}) {
    SCOPED_TRACE(slash ? "directory given with a trailing slash" : "directory given as made");
    test::TempDir d;
    PromptDiskCache cache(d.path() + (slash ? "/" : ""), 2 * one + one / 2, kFingerprint, model());  // room for two
    const std::vector<uint32_t> a = prompt_of(5, B + 1), b = prompt_of(6, B + 1), x = prompt_of(7, B + 1);
    keep(cache, a, B);
    const std::string a_file = only_file(d.path());
    keep(cache, b, B);
    // a is used again, so b is now the least recently used, whatever the
    // mtimes say: here a's is older than b's, as a wall clock stepped back
    // would leave them (or a file system whose mtimes have whole seconds,
    // where they are often equal).
    ASSERT_EQ(cache.restore(a, 0).length, B);
    for (const std::string& f : state_files(d.path())) set_mtime(f, f == a_file ? 1000 : 2000);
    keep(cache, x, B);
    EXPECT_EQ(cache.stats().evicted, 1);
    EXPECT_EQ(cache.stats().bytes, 2 * one);
    EXPECT_EQ(cache.available(a, 0), B);
    EXPECT_EQ(cache.available(b, 0), 0);
    EXPECT_EQ(cache.available(x, 0), B);
  }
  // A state larger than the whole budget is never written.
  test::TempDir d;
  PromptDiskCache tiny_budget(d.path(), one - 1, kFingerprint, model());
  keep(tiny_budget, prompt_of(5, B + 1), B);
  EXPECT_EQ(tiny_budget.stats().writes, 0);
  EXPECT_EQ(tiny_budget.available(prompt_of(5, B + 1), 0), 0);
}

TEST_P(PromptDiskCacheTest, FilesOfAnEarlierProcessAreEvictedOldestMtimeFirst) {
  const uint64_t one = 128 + B * 4 + state_bytes(B);
  const std::vector<uint32_t> a = prompt_of(5, B + 1), b = prompt_of(6, B + 1), x = prompt_of(7, B + 1);
  // Either order of mtimes, so that no order but theirs passes both.
  for (const bool a_older : {true, false}) {
    SCOPED_TRACE(a_older ? "a used longer ago" : "b used longer ago");
    test::TempDir d;
    std::string a_file;
    {
      PromptDiskCache earlier(d.path(), 2 * one + one / 2, kFingerprint, model());
      keep(earlier, a, B);
      a_file = only_file(d.path());
      keep(earlier, b, B);
    }
    for (const std::string& f : state_files(d.path())) set_mtime(f, (f == a_file) == a_older ? 1000 : 2000);
    PromptDiskCache now(d.path(), 2 * one + one / 2, kFingerprint, model());
    keep(now, x, B);
    EXPECT_EQ(now.stats().evicted, 1);
    EXPECT_EQ(now.available(a, 0), a_older ? 0 : B);
    EXPECT_EQ(now.available(b, 0), a_older ? B : 0);
    EXPECT_EQ(now.available(x, 0), B);
  }
}

TEST_P(PromptDiskCacheTest, StaleTemporariesOfDeadWritersAreRemovedAtOpen) {
  test::TempDir d;
  // A writer killed mid-write leaves "<name>.tmp-<pid>"; pid 2^22 + 1 is past
  // Linux's pid_max, so no process has it.
  const std::string stale = d.path() + "/0123.state.tmp-4194305";
  std::ofstream(stale) << "partial";
  const std::string live = d.path() + "/0456.state.tmp-" + std::to_string(::getpid());
  std::ofstream(live) << "being written";
  PromptDiskCache cache(d.path(), 1ull << 30, kFingerprint, model());
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));  // its writer is alive
}
