// setup --stream and the striped layout: a streamed store fetches and keeps
// whole experts, so --layout auto picks whole (and says why) even over two
// drives, and --layout striped is refused, naming both flags.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "model/kimi_k3/generator.h"
#include "remote/mirror_server.h"
#include "remote/stream_setup.h"
#include "store/store_manifest.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;
using namespace deltafin::test;
namespace fs = std::filesystem;

namespace {

class StripedStreamSetup : public ::testing::Test {
protected:
  void SetUp() override {
    if (!nginx_available()) {
      if (::deltafin::test::under_ci()) FAIL() << "nginx (/usr/sbin/nginx) is missing under CI";
      GTEST_SKIP() << "nginx (/usr/sbin/nginx) is missing: setup --stream --layout is NOT checked";
    }
    GenerateOptions o;
    o.out_dir = dir_.file("www/ckpt");
    o.seed = 5;
    o.dims = preset_dims("small");  // 19584-byte records: 5 pages, enough to stripe over 2 drives
    o.dims.layers = 3;
    o.dims.full_attn_layers = default_full_attn_layers(3);
    o.progress = false;
    generate_k3_checkpoint(o);
    nginx_ = std::make_unique<NginxMirror>(dir_.file("www"));
  }

  StreamSetupOptions options(const std::string& layout) {
    StreamSetupOptions so;
    so.setup.store = dir_.file("store");
    so.setup.drives = {dir_.file("d0"), dir_.file("d1")};
    for (const std::string& d : so.setup.drives) fs::create_directories(d);
    so.setup.spine = "bf16";
    so.setup.drive_mbps = {2000, 2000};
    so.setup.quiet = true;
    so.setup.layout = layout;
    so.source_url = nginx_->url() + "/ckpt";
    so.fetch.http.attempts = 2;
    so.fetch.http.backoff_s = 0.01;
    so.fetch.http.backoff_max_s = 0.05;
    so.fetch.http.connect_timeout_s = 2;
    return so;
  }

  TempDir dir_;
  std::unique_ptr<NginxMirror> nginx_;
};

}  // namespace

TEST_F(StripedStreamSetup, AutoKeepsWholeExpertsAndSaysWhy) {
  const StreamSetupReport r = run_stream_setup(options("auto"));
  EXPECT_EQ(r.setup.layout, "whole");
  EXPECT_EQ(r.setup.layout_reason, "a streamed store keeps whole experts");
  const StoreManifest m = load_store_manifest(dir_.file("store"));
  EXPECT_TRUE(m.remote.has_value());
  EXPECT_FALSE(m.striped());
  EXPECT_EQ(m.expert_bytes, 19584u);
}

TEST_F(StripedStreamSetup, StripedIsRefused) {
  for (bool full : {false, true}) {
    SCOPED_TRACE(full ? "--full" : "--stream");
    StreamSetupOptions so = options("striped");
    so.full = full;
    EXPECT_FAILS_WITH(run_stream_setup(so), full ? "--layout striped with --full" : "--layout striped with --stream",
                      "use --layout whole or auto");
    // Refused before anything is downloaded.
    EXPECT_FALSE(fs::exists(dir_.file("store/remote/source")));
    EXPECT_FALSE(fs::exists(dir_.file("store/store.json")));
    EXPECT_FALSE(fs::exists(dir_.file("store/spine")));
    for (const char* d : {"d0", "d1"}) EXPECT_FALSE(fs::exists(dir_.file(std::string(d) + "/deltafin-experts"))) << d;
  }
}
