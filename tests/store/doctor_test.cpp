// doctor: a clean store passes; each kind of damage is reported naming the
// layer, expert, drive and path; only --full catches a flipped byte.
#include "store/doctor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "store/doctor_checks.h"
#include "store/store_fixture.h"
#include "store/store_manifest.h"
#include "util/error.h"
#include "util/file.h"

using namespace deltafin;
using namespace deltafin::test;
namespace fs = std::filesystem;

namespace {

struct Store {
  TempDir root;
  SetupOptions o;
  StoreManifest m;
  Store() {
    o = copy_of_tiny_store(root.path());
    m = load_store_manifest(o.store);
  }
  std::string expert(int64_t l, int64_t e) const { return m.expert_path(m.entry(l, e).drives[0], l, e); }
};

using test::all;
using test::expect_one_problem;

}  // namespace

TEST(Doctor, CleanStorePasses) {
  Store s;
  DoctorReport quick = run_doctor(s.o.store, false);
  EXPECT_TRUE(quick.ok()) << all(quick);
  // store.json + 3 copied files + 11 spine files + 144 experts
  EXPECT_EQ(quick.files_checked, 1u + 3 + 11 + 144);
  DoctorReport full = run_doctor(s.o.store, true, false, 2);
  EXPECT_TRUE(full.ok()) << all(full);
  uint64_t spine = 0;
  for (const SpineFileEntry& f : s.m.spine_files) spine += f.bytes;
  EXPECT_GE(full.bytes_hashed, spine + 144 * s.m.expert_bytes);
}

TEST(Doctor, TruncatedAndMissingExperts) {
  Store s;
  fs::resize_file(s.expert(2, 3), s.m.expert_bytes - 1);
  expect_one_problem(run_doctor(s.o.store, false),
                     {"layer 2", "expert 3", cat("drive ", s.m.entry(2, 3).drives[0]), s.expert(2, 3), "truncated"});
  fs::remove(s.expert(2, 3));
  expect_one_problem(run_doctor(s.o.store, false), {"layer 2, expert 3", s.expert(2, 3), "missing"});
}

TEST(Doctor, FlippedByteOnlyFoundByFull) {
  Store s;
  std::string bytes = read_all(s.expert(5, 11));
  bytes[bytes.size() / 2] ^= 0x20;
  write_bytes(s.expert(5, 11), bytes);
  EXPECT_TRUE(run_doctor(s.o.store, false).ok());
  expect_one_problem(run_doctor(s.o.store, true), {"layer 5, expert 11", s.expert(5, 11), "SHA-256"});
}

TEST(Doctor, MissingDriveIsOneProblem) {
  Store s;
  fs::remove_all(s.m.drives[1].path);
  expect_one_problem(run_doctor(s.o.store, false), {"drive 1", s.m.drives[1].path, "missing", "72 expert files"});
}

TEST(Doctor, BadManifestField) {
  Store s;
  auto j = nlohmann::json::parse(read_text_file(s.o.store + "/store.json"));
  j["placement"][4]["crc32c"] = "zero";
  write_file_atomic(s.o.store + "/store.json", j.dump());
  expect_one_problem(run_doctor(s.o.store, false), {s.o.store + "/store.json", "placement[4].crc32c"});
  fs::remove(s.o.store + "/store.json");
  expect_one_problem(run_doctor(s.o.store, false), {"store.json"});
}

TEST(Doctor, SpineAndCopiedFiles) {
  Store s;
  fs::resize_file(s.o.store + "/spine/L004.bin", 100);
  std::string config = read_all(s.o.store + "/config.json");
  config[config.size() - 2] = ' ';
  write_bytes(s.o.store + "/config.json", config);
  DoctorReport r = run_doctor(s.o.store, false);
  ASSERT_EQ(r.problems.size(), 2u) << all(r);
  EXPECT_NE(all(r).find(s.o.store + "/spine/L004.bin: spine file size 100 bytes"), std::string::npos) << all(r);
  EXPECT_NE(all(r).find(s.o.store + "/config.json: SHA-256 differs"), std::string::npos) << all(r);

  // A spine byte flipped in a payload: only --full sees it.
  Store t;
  std::string spine = read_all(t.o.store + "/spine/L001.bin");
  spine[spine.size() - 1] ^= 1;
  write_bytes(t.o.store + "/spine/L001.bin", spine);
  EXPECT_TRUE(run_doctor(t.o.store, false).ok());
  expect_one_problem(run_doctor(t.o.store, true), {t.o.store + "/spine/L001.bin", "SHA-256"});
}

TEST(Doctor, MalformedHeat) {
  Store s;
  write_file_atomic(s.o.store + "/heat.json", "[]");
  expect_one_problem(run_doctor(s.o.store, false), {s.o.store + "/heat.json"});
}
