// setup --stream for a Qwen3-MoE checkpoint against a real nginx: the family
// is read from the mirror's config.json, its tokenizer.json comes along, the
// expert ranges are the sparse layers' gate, up and down projections
// (experts.bin version 2), and a run of the streamed store, fetching each
// expert on first use, gives logits equal bit for bit to the resident
// checkpoint's. Every layer is sparse, as in the released Qwen3-MoE
// checkpoints, so layer 0 has experts too (K3's never does). prefetch --all
// then fills every layer and doctor finds the store whole.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "remote/expert_ranges.h"
#include "remote/mirror_server.h"
#include "store/store_manifest.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;
using namespace deltafin::test;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t expert_files(const std::string& drive) {
  size_t n = 0;
  std::error_code ec;
  if (!fs::is_directory(drive + "/deltafin-experts", ec)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(drive + "/deltafin-experts"))
    n += e.is_regular_file() && e.path().string().find(".tmp-") == std::string::npos;
  return n;
}

}  // namespace

TEST(Qwen3MoeStream, StreamedStoreRunsExactAndPrefetchFillsEveryLayer) {
  if (!nginx_available()) {
    if (::deltafin::test::under_ci()) FAIL() << "nginx (/usr/sbin/nginx) is missing under CI: apt-get install nginx";
    GTEST_SKIP() << "nginx (/usr/sbin/nginx) is missing: setup --stream for Qwen3-MoE has NOT been checked";
  }
  TempDir dir;
  const std::string ckpt = dir.file("www/q");
  Qwen3MoeGenerateOptions o;
  o.out_dir = ckpt;
  o.seed = 9;
  o.dims = qwen3_moe_preset("tiny");
  o.dims.mlp_only_layers = {};
  o.shards = 3;
  generate_qwen3_moe_checkpoint(o);
  NginxMirror nginx(dir.file("www"));
  const std::string store = dir.file("store"), d0 = dir.file("d0"), d1 = dir.file("d1");
  fs::create_directories(d0);
  fs::create_directories(d1);
  const std::string df = deltafin_binary();
  std::string out;
  ASSERT_EQ(run_command(cat(df, " setup --source ", nginx.url(), "/q --stream --store ", store, " --drives ", d0, ",", d1,
                            " --spine bf16"),
                        &out),
            0)
      << out;
  const StoreManifest m = load_store_manifest(store);
  EXPECT_EQ(m.family, "qwen3_moe");
  ASSERT_TRUE(m.remote.has_value());
  EXPECT_EQ(m.moe_layers, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(fs::exists(store + "/tokenizer.json"));
  EXPECT_EQ(slurp(ExpertRanges::path(store)).substr(0, 8), "DFXR0002");
  EXPECT_EQ(ExpertRanges::load(store, m).parts(), 3u);
  EXPECT_EQ(expert_files(d0) + expert_files(d1), 0u) << "setup --stream fetched experts";

  const std::string tokens = "5,17,260,3,99,42,7,300,11,12";
  ASSERT_EQ(run_command(cat(df, " logits --model ", ckpt, " --tokens ", tokens, " --out ", dir.file("a.npy")), &out), 0)
      << out;
  ASSERT_EQ(run_command(cat(df, " logits --store ", store, " --tokens ", tokens, " --cache-gb 0 --out ", dir.file("b.npy")),
                        &out),
            0)
      << out;
  EXPECT_EQ(slurp(dir.file("a.npy")), slurp(dir.file("b.npy"))) << "streamed logits differ from the resident ones";
  const size_t fetched = expert_files(d0) + expert_files(d1);
  EXPECT_GT(fetched, 0u);

  ASSERT_EQ(run_command(cat(df, " prefetch --store ", store, " --all --quiet"), &out), 0) << out;
  size_t placed = 0;
  for (int64_t l : m.moe_layers)
    for (int64_t e = 0; e < m.experts; ++e) placed += m.entry(l, e).drives.size();
  EXPECT_EQ(expert_files(d0) + expert_files(d1), placed);
  ASSERT_EQ(run_command(cat(df, " doctor --store ", store, " --full"), &out), 0) << out;
  ASSERT_EQ(run_command(cat(df, " logits --store ", store, " --tokens ", tokens, " --cache-gb 0 --out ", dir.file("c.npy")),
                        &out),
            0)
      << out;
  EXPECT_EQ(slurp(dir.file("a.npy")), slurp(dir.file("c.npy")));
}
