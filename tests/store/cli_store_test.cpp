// `deltafin setup` and `deltafin doctor` through the binary: flags, messages,
// exit codes, the Ctrl-C and free-space test hooks.
#include <gtest/gtest.h>

#include <filesystem>

#include "store/store_fixture.h"
#include "store/store_manifest.h"
#include "util/error.h"
#include "util/file.h"

using namespace deltafin;
using namespace deltafin::test;
namespace fs = std::filesystem;

namespace {

std::string setup_cmd(const TempDir& root, const std::string& extra) {
  return cat(deltafin_binary(), " setup --from ", tiny_checkpoint_dir(), " --store ", root.file("store"), " --drives ",
             root.file("drive0"), ",", root.file("drive1"), " --drive-mbps 1500,1500 --quiet ", extra);
}

}  // namespace

TEST(StoreCli, SetupThenDoctor) {
  TempDir root;
  make_drives(root.path(), 2);
  std::string out;
  ASSERT_EQ(run_command(setup_cmd(root, "--spine auto --ram-gb 16 --replicate-hot 5"), &out), 0) << out;
  EXPECT_NE(out.find("spine: bf16 — "), std::string::npos) << out;
  EXPECT_NE(out.find("fits 75% of the 16.0 GiB RAM budget (--ram-gb)"), std::string::npos) << out;
  EXPECT_NE(out.find("RAM budget 16.0 GiB"), std::string::npos) << out;
  EXPECT_NE(out.find("left for the expert cache"), std::string::npos) << out;
  EXPECT_NE(out.find("nothing replicated"), std::string::npos) << out;
  EXPECT_NE(out.find("144 expert files written"), std::string::npos) << out;
  EXPECT_EQ(load_store_manifest(root.file("store")).drives[0].read_bytes_per_s, 1.5e9);

  ASSERT_EQ(run_command(cat(deltafin_binary(), " doctor --store ", root.file("store")), &out), 0) << out;
  EXPECT_NE(out.find("the store is OK"), std::string::npos) << out;
  ASSERT_EQ(run_command(cat(deltafin_binary(), " doctor --full --quiet --store ", root.file("store")), &out), 0) << out;
  EXPECT_EQ(out.find("stray"), std::string::npos) << out;

  // A stray file is listed with its size and a total, and is not a problem (exit 0).
  const std::string stray =
      load_store_manifest(root.file("store")).drives[1].path + "/deltafin-experts/L003/E001.bin.tmp-99";
  write_bytes(stray, "12345");
  ASSERT_EQ(run_command(cat(deltafin_binary(), " doctor --store ", root.file("store")), &out), 0) << out;
  EXPECT_NE(out.find("stray: " + stray + ": 5 bytes (a temporary file)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("1 stray file, 5 bytes (5 B) in all"), std::string::npos) << out;
  EXPECT_NE(out.find("the next setup of the store removes them"), std::string::npos) << out;
  EXPECT_NE(out.find(", 0 problems, 1 stray file: the store is OK"), std::string::npos) << out;
  fs::remove(stray);

  const StoreManifest m = load_store_manifest(root.file("store"));
  const std::string victim = m.expert_path(m.entry(6, 6).drives[0], 6, 6);
  std::string bytes = read_all(victim);
  bytes[7] ^= 1;
  write_bytes(victim, bytes);
  ASSERT_EQ(run_command(cat(deltafin_binary(), " doctor --full --quiet --store ", root.file("store")), &out), 1) << out;
  EXPECT_NE(out.find("problem: layer 6, expert 6"), std::string::npos) << out;
  EXPECT_NE(out.find("1 problem"), std::string::npos) << out;
}

TEST(StoreCli, InterruptThenResume) {
  TempDir root;
  make_drives(root.path(), 2);
  std::string out;
  EXPECT_EQ(run_command("DELTAFIN_SETUP_STOP_AFTER=5 " + setup_cmd(root, "--threads 1"), &out), 1) << out;
  EXPECT_NE(out.find("interrupted"), std::string::npos) << out;
  EXPECT_FALSE(file_exists(root.file("store/store.json")));
  ASSERT_EQ(run_command(setup_cmd(root, ""), &out), 0) << out;
  EXPECT_NE(out.find("139 expert files written, 5 already there and verified"), std::string::npos) << out;
}

TEST(StoreCli, Refusals) {
  TempDir root;
  make_drives(root.path(), 2);
  std::string out;
  EXPECT_EQ(run_command("DELTAFIN_FAKE_FREE_BYTES=100 " + setup_cmd(root, ""), &out), 1) << out;
  EXPECT_NE(out.find("not enough free space"), std::string::npos) << out;
  EXPECT_NE(out.find("100 bytes"), std::string::npos) << out;

  fs::remove_all(root.file("drive1"));
  EXPECT_EQ(run_command(setup_cmd(root, ""), &out), 1) << out;
  EXPECT_NE(out.find(root.file("drive1")), std::string::npos) << out;
  EXPECT_NE(out.find("does not exist"), std::string::npos) << out;

  EXPECT_NE(run_command(setup_cmd(root, "--spine fp8"), &out), 0) << out;
  EXPECT_NE(run_command(cat(deltafin_binary(), " doctor --store ", root.file("nostore")), &out), 0) << out;
  EXPECT_NE(out.find("store.json"), std::string::npos) << out;
}
