// store/remote/hashes.bin (store/hash_journal.h): one 48-byte slot per MoE
// (layer, expert) holding the SHA-256 and CRC-32C recorded at an expert's
// first fetch. The slot layout is checked from the file's bytes, not only
// through the class, so a change of format cannot pass unnoticed.
#include "store/hash_journal.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/test_support.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/file.h"

using namespace deltafin;
using namespace deltafin::test;
namespace fs = std::filesystem;

namespace {

// The tiny preset's shape: 10 layers (layer 0 dense), 16 experts.
constexpr int64_t kLayers = 10, kExperts = 16;
constexpr size_t kSlot = 48;
constexpr size_t kFileBytes = (kLayers - 1) * kExperts * kSlot;

ExpertHash make_hash(uint8_t seed) {
  ExpertHash h;
  for (size_t i = 0; i < h.sha256.size(); ++i) h.sha256[i] = static_cast<uint8_t>(seed * 31 + i * 7 + 1);
  h.crc32c = 0x01020304u * seed + 17;
  return h;
}

uint32_t u32_at(const std::string& bytes, size_t at) {
  uint32_t v;
  std::memcpy(&v, bytes.data() + at, 4);
  return v;
}

size_t slot_offset(int64_t layer, int64_t expert) { return static_cast<size_t>((layer - 1) * kExperts + expert) * kSlot; }

void expect_same(const std::optional<ExpertHash>& got, const ExpertHash& want) {
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->sha256, want.sha256);
  EXPECT_EQ(got->crc32c, want.crc32c);
}

}  // namespace

TEST(HashJournal, CreatedEmptyWithOneSlotPerMoeExpert) {
  TempDir root;
  const std::string store = root.file("store");
  fs::create_directories(store);
  HashJournal j(store, kLayers, kExperts);
  EXPECT_EQ(HashJournal::path(store), store + "/remote/hashes.bin");
  ASSERT_TRUE(file_exists(HashJournal::path(store)));
  EXPECT_EQ(fs::file_size(HashJournal::path(store)), kFileBytes);
  EXPECT_EQ(test::read_bytes(HashJournal::path(store)), std::string(kFileBytes, '\0'));
  EXPECT_EQ(j.known(), 0u);
  EXPECT_TRUE(j.damaged().empty());
  for (int64_t l = 1; l < kLayers; ++l)
    for (int64_t e = 0; e < kExperts; ++e) EXPECT_FALSE(j.get(l, e).has_value()) << l << "/" << e;
}

TEST(HashJournal, RecordThenGetAndTheSlotBytes) {
  TempDir root;
  HashJournal j(root.path(), kLayers, kExperts);
  const ExpertHash a = make_hash(1), b = make_hash(2);
  j.record(1, 0, a);
  j.record(kLayers - 1, kExperts - 1, b);
  expect_same(j.get(1, 0), a);
  expect_same(j.get(kLayers - 1, kExperts - 1), b);
  EXPECT_FALSE(j.get(1, 1).has_value());
  EXPECT_FALSE(j.get(2, 0).has_value());
  EXPECT_EQ(j.known(), 2u);

  // Written through to the file at once (one pwrite per record), in the
  // documented layout: magic "DFH1", crc32c, sha256, zero, CRC-32C of 44 bytes.
  const std::string bytes = test::read_bytes(HashJournal::path(root.path()));
  ASSERT_EQ(bytes.size(), kFileBytes);
  for (const auto& [layer, expert, h] : {std::tuple{int64_t{1}, int64_t{0}, a}, std::tuple{kLayers - 1, kExperts - 1, b}}) {
    const size_t at = slot_offset(layer, expert);
    EXPECT_EQ(bytes.substr(at, 4), "DFH1");
    EXPECT_EQ(u32_at(bytes, at + 4), h.crc32c);
    EXPECT_EQ(std::memcmp(bytes.data() + at + 8, h.sha256.data(), 32), 0);
    EXPECT_EQ(u32_at(bytes, at + 40), 0u);
    EXPECT_EQ(u32_at(bytes, at + 44), crc32c(bytes.data() + at, 44));
  }
  // Every other slot is still all zero.
  std::string others = bytes;
  std::memset(others.data() + slot_offset(1, 0), 0, kSlot);
  std::memset(others.data() + slot_offset(kLayers - 1, kExperts - 1), 0, kSlot);
  EXPECT_EQ(others, std::string(kFileBytes, '\0'));
}

TEST(HashJournal, PersistsAcrossReopen) {
  TempDir root;
  const ExpertHash a = make_hash(3), b = make_hash(4);
  {
    HashJournal j(root.path(), kLayers, kExperts);
    j.record(4, 7, a);
    j.record(9, 15, b);
  }
  HashJournal j(root.path(), kLayers, kExperts);
  EXPECT_EQ(j.known(), 2u);
  EXPECT_TRUE(j.damaged().empty());
  expect_same(j.get(4, 7), a);
  expect_same(j.get(9, 15), b);
  EXPECT_FALSE(j.get(4, 8).has_value());
  // Recording the same hash again is not a change: accepted, nothing moves.
  EXPECT_NO_THROW(j.record(4, 7, a));
  expect_same(j.get(4, 7), a);
  EXPECT_EQ(j.known(), 2u);
}

TEST(HashJournal, AllZeroFileKnowsNothing) {
  TempDir root;
  fs::create_directories(root.file("remote"));
  write_bytes(HashJournal::path(root.path()), std::string(kFileBytes, '\0'));
  HashJournal j(root.path(), kLayers, kExperts);
  EXPECT_EQ(j.known(), 0u);
  EXPECT_TRUE(j.damaged().empty());
  EXPECT_FALSE(j.get(1, 0).has_value());
  EXPECT_FALSE(j.get(5, 5).has_value());
}

TEST(HashJournal, TornSlotIsDamagedAndUnknown) {
  TempDir root;
  const ExpertHash a = make_hash(5), b = make_hash(6), c = make_hash(7);
  {
    HashJournal j(root.path(), kLayers, kExperts);
    j.record(2, 3, a);
    j.record(6, 11, b);
    j.record(8, 0, c);
  }
  const std::string path = HashJournal::path(root.path());
  std::string bytes = test::read_bytes(path);
  bytes[slot_offset(6, 11) + 20] ^= 0x40;  // inside the sha256: the slot's own CRC no longer matches
  bytes[slot_offset(8, 0) + 0] ^= 0x01;    // the magic
  write_bytes(path, bytes);
  {
    HashJournal j(root.path(), kLayers, kExperts);
    ASSERT_EQ(j.damaged().size(), 2u);
    EXPECT_EQ(j.damaged()[0], "layer 6 expert 11");
    EXPECT_EQ(j.damaged()[1], "layer 8 expert 0");
    EXPECT_FALSE(j.get(6, 11).has_value());
    EXPECT_FALSE(j.get(8, 0).has_value());
    expect_same(j.get(2, 3), a);  // the neighbours are untouched
    EXPECT_EQ(j.known(), 1u);
    // Treated as not fetched: the next fetch records its hash afresh.
    j.record(6, 11, b);
    expect_same(j.get(6, 11), b);
  }
  HashJournal j(root.path(), kLayers, kExperts);
  ASSERT_EQ(j.damaged().size(), 1u);
  EXPECT_EQ(j.damaged()[0], "layer 8 expert 0");
  expect_same(j.get(6, 11), b);
  EXPECT_EQ(j.known(), 2u);
}

TEST(HashJournal, TornSlotWithWrongCrcFieldOnly) {
  TempDir root;
  {
    HashJournal j(root.path(), kLayers, kExperts);
    j.record(3, 3, make_hash(8));
  }
  const std::string path = HashJournal::path(root.path());
  std::string bytes = test::read_bytes(path);
  bytes[slot_offset(3, 3) + 46] ^= 0x10;  // the slot CRC itself
  write_bytes(path, bytes);
  HashJournal j(root.path(), kLayers, kExperts);
  ASSERT_EQ(j.damaged().size(), 1u);
  EXPECT_EQ(j.damaged()[0], "layer 3 expert 3");
  EXPECT_FALSE(j.get(3, 3).has_value());
}

TEST(HashJournal, DifferentHashOverKnownOneIsRefused) {
  TempDir root;
  const ExpertHash a = make_hash(9);
  ExpertHash other_sha = a, other_crc = a;
  other_sha.sha256[31] ^= 1;
  other_crc.crc32c ^= 1;
  {
    HashJournal j(root.path(), kLayers, kExperts);
    j.record(5, 9, a);
    const std::string before = test::read_bytes(HashJournal::path(root.path()));
    EXPECT_FAILS_WITH(j.record(5, 9, other_sha), HashJournal::path(root.path()), "layer 5 expert 9",
                      "a different hash is already recorded", to_hex(a.sha256));
    EXPECT_FAILS_WITH(j.record(5, 9, other_crc), "layer 5 expert 9", "a different hash is already recorded");
    expect_same(j.get(5, 9), a);
    EXPECT_EQ(test::read_bytes(HashJournal::path(root.path())), before);  // the file was not written
  }
  HashJournal j(root.path(), kLayers, kExperts);
  expect_same(j.get(5, 9), a);
  EXPECT_FAILS_WITH(j.record(5, 9, other_sha), "a different hash is already recorded");
}

TEST(HashJournal, WrongFileSizeIsAnErrorNamingTheFile) {
  for (const size_t size : {kFileBytes - 1, kFileBytes + 1, kFileBytes + kSlot, size_t{0}}) {
    SCOPED_TRACE(size);
    TempDir root;
    fs::create_directories(root.file("remote"));
    const std::string path = HashJournal::path(root.path());
    write_bytes(path, std::string(size, '\0'));
    EXPECT_FAILS_WITH(HashJournal(root.path(), kLayers, kExperts), path, std::to_string(size) + " bytes",
                      "expected " + std::to_string(kFileBytes));
  }
  // A journal of another store shape (other layer or expert counts).
  TempDir root;
  { HashJournal j(root.path(), kLayers, kExperts); }
  EXPECT_FAILS_WITH(HashJournal(root.path(), kLayers + 1, kExperts), HashJournal::path(root.path()),
                    "does not belong to this store");
  EXPECT_FAILS_WITH(HashJournal(root.path(), kLayers, kExperts * 2), HashJournal::path(root.path()));
}

TEST(HashJournal, LayerZeroAndOutOfRangeAreErrors) {
  TempDir root;
  HashJournal j(root.path(), kLayers, kExperts);
  const ExpertHash h = make_hash(10);
  EXPECT_FAILS_WITH(j.get(0, 0), "layer 0", "expert 0");
  EXPECT_FAILS_WITH(j.record(0, 3, h), "layer 0", "expert 3");
  EXPECT_FAILS_WITH(j.get(kLayers, 0), "layer 10");
  EXPECT_FAILS_WITH(j.record(kLayers, 0, h), "layer 10");
  EXPECT_FAILS_WITH(j.get(1, kExperts), "expert 16");
  EXPECT_FAILS_WITH(j.record(1, kExperts, h), "expert 16");
  EXPECT_FAILS_WITH(j.get(1, -1), "expert -1");
  EXPECT_FAILS_WITH(j.get(-1, 0), "layer -1");
  EXPECT_EQ(j.known(), 0u);
  EXPECT_EQ(test::read_bytes(HashJournal::path(root.path())), std::string(kFileBytes, '\0'));
}
