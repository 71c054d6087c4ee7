// bench --cold on a striped store: drop_expert_page_cache must reach the
// files the store really holds (each drive's stripe of every expert), as it
// does for a whole store's expert files.
#include <gtest/gtest.h>

#include <filesystem>

#include "bench/bench_runner.h"
#include "model/kimi_k3/generator.h"
#include "store/setup.h"
#include "store/store_manifest.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;
namespace fs = std::filesystem;

namespace {

// The tiny preset with 26112-byte records (7 pages): 9 MoE layers x 16
// experts = 144 records, stripable over 2 drives.
std::string setup_store(const test::TempDir& root, const std::string& ckpt, int drives, const std::string& layout) {
  SetupOptions s;
  s.from = ckpt;
  s.store = root.file("store_" + layout);
  for (int d = 0; d < drives; ++d) {
    s.drives.push_back(root.file(layout + "_drive" + std::to_string(d)));
    fs::create_directories(s.drives.back());
  }
  s.drive_mbps.assign(static_cast<size_t>(drives), 1000.0);
  s.spine = "bf16";
  s.layout = layout;
  s.quiet = true;
  run_setup(s);
  return s.store;
}

size_t files_on_drives(const StoreManifest& m) {
  size_t n = 0;
  for (const StoreDrive& d : m.drives)
    for (const auto& e : fs::recursive_directory_iterator(d.path)) n += e.is_regular_file();
  return n;
}

}  // namespace

TEST(StripedBench, ColdRunDropsThePageCacheOfEveryStripe) {
  test::TempDir root;
  GenerateOptions g;
  g.out_dir = root.file("ckpt");
  g.seed = 3;
  g.dims = preset_dims("tiny");
  g.dims.latent = 128;
  g.dims.moe_intermediate = 128;
  g.progress = false;
  generate_k3_checkpoint(g);

  // Whole layout, 2 drives: 144 expert files, all dropped.
  const std::string whole = setup_store(root, g.out_dir, 2, "whole");
  ASSERT_EQ(files_on_drives(load_store_manifest(whole)), 144u);
  EXPECT_EQ(drop_expert_page_cache(whole), "page cache dropped (posix_fadvise DONTNEED) for 144 expert files");

  // Striped, 2 drives: 288 stripe files, every one on its drive; all must be dropped.
  const std::string striped = setup_store(root, g.out_dir, 2, "striped");
  const StoreManifest m = load_store_manifest(striped);
  ASSERT_TRUE(m.striped());
  ASSERT_EQ(files_on_drives(m), 288u);
  EXPECT_EQ(drop_expert_page_cache(striped), "page cache dropped (posix_fadvise DONTNEED) for 288 expert files");
}
