// `deltafin bench` end to end on a tiny generated model and its two-drive
// store, through the real binary: the report's fields, the token check, the
// JSON and pictures, --vs (good and bad option strings) and --cold.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/xml_check.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {
namespace {

std::string df(const std::string& args) { return test::deltafin_binary() + " " + args + " 2>&1"; }

// One tiny checkpoint and store for every test of this file.
struct TinyStore {
  test::TempDir root;
  std::string store;
  TinyStore() {
    std::string out;
    const std::string ckpt = root.file("ckpt");
    if (test::run_command(df("make-model --quiet --preset tiny --seed 5 --out " + ckpt), &out) != 0)
      throw Error("make-model failed: " + out);
    store = root.file("store");
    for (const char* d : {"d0", "d1"}) std::filesystem::create_directories(root.file(d));
    if (test::run_command(df(cat("setup --from ", ckpt, " --store ", store, " --drives ", root.file("d0"), ",",
                                 root.file("d1"), " --drive-mbps 1000,1000 --quiet")),
                          &out) != 0)
      throw Error("setup failed: " + out);
  }
};

TinyStore& tiny() {
  static TinyStore t;
  return t;
}

TEST(BenchCommand, RunsATinyStoreAndReportsEveryFigure) {
  test::TempDir tmp;
  std::string out;
  const std::string json = tmp.file("b.json"), prefix = tmp.file("b");
  ASSERT_EQ(test::run_command(df(cat("bench --store ", tiny().store, " --runs 2 --warmup 1 --max-new 4 --json ", json,
                                     " --svg ", prefix)),
                              &out),
            0)
      << out;
  for (const std::string& s : std::vector<std::string>{"3 prompts (4, 16, 64 tokens) x 4 generated tokens", "2 measured runs", "1 warm-up run",
                        "excluded", "warm runs", "every run's tokens equal the first run's (3 runs", "decode_tokens_per_s",
                        "ttft_ms", "bytes_read_per_token", "prefill_amplification", "hit_rate", "lookahead_recall",
                        "compute_ms_per_token", "wait_ms_per_token", "drive0_mb_s", "drive1_busy", "drives_total_mb_s",
                        "peak_rss_bytes", "wrote " + json, "-drives.svg", "-steps.svg", "-hits.svg"})
    EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
  const auto j = nlohmann::json::parse(read_text_file(json));
  EXPECT_TRUE(j["tokens_equal"].get<bool>());
  EXPECT_NE(j["command"].get<std::string>().find("bench --store"), std::string::npos);
  EXPECT_EQ(j["drives"], 2);
  EXPECT_EQ(j["runs_detail"].size(), 3u);
  EXPECT_EQ(j["summary"]["A"]["decode_tokens_per_s"]["n"], 2);
  EXPECT_GT(j["summary"]["A"]["decode_tokens_per_s"]["median"].get<double>(), 0);
  EXPECT_EQ(j["runs_detail"][1]["prompts"][2]["tokens"].size(), 4u);
  // The warm-up started from an empty cache: its prefill read experts. (Warm
  // measured runs of this tiny model read nothing: it fits the cache.)
  EXPECT_GT(j["runs_detail"][0]["metrics"]["prefill_amplification"].get<double>(), 0.0);
  for (const char* suffix : {"-drives.svg", "-steps.svg", "-hits.svg"})
    EXPECT_EQ(test::xml_problem(read_text_file(prefix + suffix)), "") << suffix;
  // The drive-scaling chart from bench JSON files (here one, of 2 drives).
  ASSERT_EQ(test::run_command(df(cat("bench-chart --scaling ", tmp.file("s.svg"), " ", json)), &out), 0) << out;
  EXPECT_EQ(test::xml_problem(read_text_file(tmp.file("s.svg"))), "");
  test::write_bytes(tmp.file("bad.json"), "{}");
  EXPECT_EQ(test::run_command(df(cat("bench-chart --scaling ", tmp.file("t.svg"), " ", json, " ", tmp.file("bad.json"))), &out), 1);
  EXPECT_NE(out.find("bad.json"), std::string::npos) << out;
  EXPECT_FALSE(file_exists(tmp.file("t.svg")));  // nothing written when an input is bad
}

TEST(BenchCommand, VsRunsBothConfigurationsAndReportsRatios) {
  test::TempDir tmp;
  std::string out;
  ASSERT_EQ(test::run_command(df(cat("bench --store ", tiny().store, " --runs 1 --warmup 0 --max-new 2 --json ",
                                     tmp.file("ab.json"), " --vs \"--lookahead off --cache-gb 0\"")),
                              &out),
            0)
      << out;
  for (const char* s : {"B: --lookahead off --cache-gb 0;", "alternate A B", "B / A, pair by pair",
                        "every run's tokens equal the first run's (2 runs"})
    EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
  const auto j = nlohmann::json::parse(read_text_file(tmp.file("ab.json")));
  EXPECT_EQ(j["summary"]["B/A"]["decode_tokens_per_s"]["n"], 1);
  EXPECT_EQ(j["runs_detail"][1]["config"], "B");
}

TEST(BenchCommand, BadVsStringsAreErrorsNamingWhatIsWrong) {
  // Checked before any model is loaded: the store need not exist.
  struct Case {
    const char* vs;
    std::vector<std::string> needles;
  };
  for (const Case& c : {Case{"--bogus 1", {"--vs", "--bogus"}}, Case{"--lookahead maybe", {"--vs", "--lookahead", "maybe"}},
                        Case{"--cache-gb", {"--vs", "--cache-gb"}}, Case{"'--io uring", {"--vs", "unbalanced"}},
                        Case{"stray", {"--vs", "stray"}}, Case{" ", {"--vs is empty"}}}) {
    std::string out;
    EXPECT_EQ(test::run_command(df(cat("bench --store /nonexistent/store --vs ", test::shell_quote(c.vs))), &out), 1)
        << c.vs << "\n" << out;
    for (const std::string& n : c.needles) EXPECT_NE(out.find(n), std::string::npos) << c.vs << ": " << n << "\n" << out;
  }
}

TEST(BenchCommand, ColdRunsReloadAndSayWhatWasDropped) {
  std::string out;
  ASSERT_EQ(test::run_command(df(cat("bench --store ", tiny().store, " --runs 1 --warmup 0 --max-new 2 --cold")), &out), 0)
      << out;
  for (const char* s : {"cold runs: every run loads its model afresh", "page cache dropped (posix_fadvise DONTNEED) for",
                        "expert files"})
    EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
}

}  // namespace
}  // namespace deltafin
