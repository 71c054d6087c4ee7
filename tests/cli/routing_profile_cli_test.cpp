// make-model --routing-profile (issue 35), for K3 and Qwen3-MoE through the
// binary: `uniform` writes the same bytes as no option; a profile is the same
// bytes for the same seed; the router rows are the plain checkpoint's times
// the s_e the config records, the selection bias is zero, the attention
// projections are times the recorded gains and every other tensor is
// unchanged; a profile model runs and its routes are skewed; the fit gives
// the target popularity under an independent Monte Carlo; unknown names and
// families without the option are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "experts/route_trace.h"
#include "format/checkpoint.h"
#include "model/common/routing_profile.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/file.h"
#include "util/numeric.h"
#include "util/rng.h"

namespace deltafin::routing_profile_cli_test {
namespace {

namespace fs = std::filesystem;
using test::df;

struct Family {
  const char* name;
  const char* args;    // make-model's shape options
  const char* router;  // the router tensor's suffix after layers.<i>.
};

void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

const Family kK3{"k3", "--arch k3 --preset tiny --experts 64 --top-k 8", "block_sparse_moe.gate.weight"};
const Family kQwen{"qwen3_moe", "--arch qwen3_moe --preset tiny --experts 32 --top-k 4", "mlp.gate.weight"};

std::string make(const Family& f, const std::string& dir, const std::string& profile, int seed = 5) {
  std::string out;
  const std::string cmd = df(std::string("make-model ") + f.args + " --quiet --seed " + std::to_string(seed) +
                             " --out " + dir + (profile.empty() ? "" : " --routing-profile " + profile));
  if (test::run_command(cmd, &out) != 0) throw std::runtime_error("make-model failed: " + out);
  return dir;
}

// Every file of a directory, by name.
std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    out[e.path().filename().string()] = read_text_file(e.path().string());
  return out;
}

std::string raw(const Checkpoint& c, const std::string& name) {
  TensorRef t = c.find(name);
  if (!t) throw std::runtime_error("no tensor " + name);
  std::string bytes(t.info->bytes(), '\0');
  t.shard->read(*t.info, reinterpret_cast<uint8_t*>(bytes.data()));
  return bytes;
}

std::vector<double> values(const Checkpoint& c, const std::string& name) {
  const std::string b = raw(c, name);
  const TensorRef t = c.find(name);
  std::vector<double> out;
  const auto* p = reinterpret_cast<const uint8_t*>(b.data());
  if (t.info->dtype == DType::BF16)
    for (size_t i = 0; i + 1 < b.size(); i += 2) out.push_back(bf16_to_f32(load_u16le(p + i)));
  else
    for (size_t i = 0; i + 3 < b.size(); i += 4)
      out.push_back(f32_from_bits(static_cast<uint32_t>(p[i] | (p[i + 1] << 8) | (p[i + 2] << 16)) |
                                  (static_cast<uint32_t>(p[i + 3]) << 24)));
  return out;
}

// Least-squares ratio of row r of `got` to row r of `plain`.
double row_ratio(const std::vector<double>& got, const std::vector<double>& plain, size_t r, size_t cols) {
  double num = 0, den = 0;
  for (size_t j = r * cols; j < (r + 1) * cols; ++j) num += got[j] * plain[j], den += plain[j] * plain[j];
  return num / den;
}

// "...layers.<i>.<suffix>" -> i, or -1.
int64_t layer_in(const std::string& name, const std::string& suffix) {
  std::optional<int64_t> l = layer_of(name, suffix);
  return l ? *l : -1;
}

// The share of routes served by the hottest fifth (rounded down) of a layer's experts, the
// mean over the trace's MoE layers (prefill and decode routes together).
double top20_share(const std::string& trace_path) {
  const RouteTrace t = read_route_trace(trace_path);
  std::map<int64_t, std::vector<int64_t>> counts;
  for (const RouteTrace::Pass& p : t.passes)
    for (size_t r = 0; r < p.layer.size(); ++r) {
      std::vector<int64_t>& c = counts[p.layer[r]];
      c.resize(static_cast<size_t>(t.experts));
      for (int64_t s = 0; s < t.top_k; ++s) ++c[static_cast<size_t>(p.experts[r * t.top_k + s])];
    }
  double sum = 0;
  for (auto& [layer, c] : counts) {
    std::sort(c.rbegin(), c.rend());
    int64_t top = 0, all = 0;
    for (size_t e = 0; e < c.size(); ++e) (e < c.size() / 5 ? top : all) += c[e];
    sum += static_cast<double>(top) / static_cast<double>(top + all);
  }
  return sum / static_cast<double>(counts.size());
}

// One family's checkpoints, made once for the suite: seed 5 without the
// option, with uniform, twice with olmoe-like, and with k3-fork.
struct Models {
  test::TempDir dir;
  std::string plain, uniform, olmoe, olmoe_again, fork;
};

const Models& models(const Family& f) {
  static std::map<std::string, std::unique_ptr<Models>> all;
  std::unique_ptr<Models>& m = all[f.name];
  if (!m) {
    m = std::make_unique<Models>();
    m->plain = make(f, m->dir.file("plain"), "");
    m->uniform = make(f, m->dir.file("uniform"), "uniform");
    m->olmoe = make(f, m->dir.file("olmoe"), "olmoe-like");
    m->olmoe_again = make(f, m->dir.file("olmoe-again"), "olmoe-like");
    m->fork = make(f, m->dir.file("fork"), "k3-fork");
  }
  return *m;
}

class RoutingProfileCli : public testing::TestWithParam<Family> {};

// The value the generators draw for element i of a tensor without a profile
// (their rule for projections and K3's bias: Rng(seed ^ fnv1a64(name)), one
// normal per element, times the init scale), to the tensor's precision.
std::vector<double> drawn(const std::string& name, size_t n, double scale, bool bf16) {
  Rng rng(5 ^ fnv1a64(name));
  std::vector<double> out(n);
  for (double& v : out) {
    const float f = static_cast<float>(scale * rng.normal());
    v = bf16 ? bf16_to_f32(f32_to_bf16(f)) : f;
  }
  return out;
}

TEST_P(RoutingProfileCli, UniformWritesTheSameBytesAsNoOption) {
  const Family& f = GetParam();
  const auto plain = files_of(models(f).plain);
  const auto uniform = files_of(models(f).uniform);
  ASSERT_EQ(plain.size(), uniform.size());
  for (const auto& [name, bytes] : plain) {
    ASSERT_TRUE(uniform.count(name)) << name;
    EXPECT_TRUE(uniform.at(name) == bytes) << name << " differs";
  }
  // Both are the generator's plain draws (an option that changed both alike
  // would pass the comparison above): no record, and the router, the
  // selection bias and an attention projection as drawn.
  EXPECT_FALSE(nlohmann::json::parse(uniform.at("config.json")).contains(kRoutingProfileKey));
  const Checkpoint c = Checkpoint::open(models(f).uniform);
  const bool k3 = f.name == std::string("k3");
  const std::string layer = k3 ? "language_model.model.layers.1." : "model.layers.1.";
  for (const std::string& t : {layer + f.router, layer + "self_attn.o_proj.weight"}) {
    const std::vector<uint64_t> shape = c.find(t).info->shape;
    EXPECT_EQ(values(c, t), drawn(t, shape[0] * shape[1], 1.0 / std::sqrt(static_cast<double>(shape[1])), true)) << t;
  }
  if (k3) {
    const std::string bias = layer + "block_sparse_moe.gate.e_score_correction_bias";
    EXPECT_EQ(values(c, bias), drawn(bias, 64, 0.05, false));
  }
}

TEST_P(RoutingProfileCli, AProfileIsTheSameBytesForTheSameSeed) {
  const auto a = files_of(models(GetParam()).olmoe);
  const auto b = files_of(models(GetParam()).olmoe_again);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, bytes] : a) EXPECT_TRUE(b.count(name) && b.at(name) == bytes) << name << " differs";
  // The hot experts differ between layers (a permutation per layer), so the
  // equality is not that of constant scales.
  const nlohmann::json rec = nlohmann::json::parse(a.at("config.json")).at(kRoutingProfileKey);
  EXPECT_NE(rec.at("row_scales").at("1"), rec.at("row_scales").at("2"));
}

TEST_P(RoutingProfileCli, RowsAreThePlainOnesTimesTheRecordedFactorsAndNothingElseChanges) {
  const Family& f = GetParam();
  const Checkpoint plain = Checkpoint::open(models(f).plain);
  const std::string dir = models(f).olmoe;
  const Checkpoint shaped = Checkpoint::open(dir);
  const nlohmann::json rec = nlohmann::json::parse(read_text_file(dir + "/config.json")).at(kRoutingProfileKey);
  EXPECT_EQ(rec.at("profile"), "olmoe-like");
  const nlohmann::json& g = rec.at("gains");
  const std::vector<int64_t> linear = rec.at("linear_attention_layers").get<std::vector<int64_t>>();
  const std::vector<std::string> queries = rec.at("query_tensors").get<std::vector<std::string>>();
  int routers = 0, projections = 0;
  for (const std::string& name : plain.names()) {
    const std::vector<uint64_t> shape = plain.find(name).info->shape;
    const size_t rows = shape.empty() ? 1 : shape[0];
    const size_t cols = shape.size() < 2 ? 1 : shape[1];
    std::vector<double> want;  // the documented factor of each row; empty: the same bytes
    if (int64_t l = layer_in(name, f.router); l >= 0) {
      want = rec.at("row_scales").at(std::to_string(l)).get<std::vector<double>>();
      ++routers;
    } else if (int64_t l = layer_in(name, "self_attn.o_proj.weight"); l >= 0) {
      const bool lin = std::find(linear.begin(), linear.end(), l) != linear.end();
      want.assign(rows, g.at(lin ? "linear" : "attention").get<double>());
      ++projections;
    } else {
      for (const std::string& q : queries) {
        const int64_t l = layer_in(name, q);
        if (l >= 0 && std::find(linear.begin(), linear.end(), l) == linear.end())
          want.assign(rows, g.at("query").get<double>());
      }
    }
    if (name.find("e_score_correction_bias") != std::string::npos) {
      for (double v : values(shaped, name)) ASSERT_EQ(v, 0.0) << name;
      continue;
    }
    if (want.empty()) {
      EXPECT_TRUE(raw(plain, name) == raw(shaped, name)) << name << " changed";
      continue;
    }
    ASSERT_EQ(want.size(), rows) << name;
    const std::vector<double> a = values(plain, name), b = values(shaped, name);
    for (size_t r = 0; r < rows; ++r)  // two BF16 roundings: within 2^-7 relative
      ASSERT_NEAR(row_ratio(b, a, r, cols), want[r], 0.008 * want[r] + 1e-9) << name << " row " << r;
  }
  EXPECT_EQ(routers, f.name == std::string("k3") ? 9 : 3);  // tiny: K3 10 layers (1 dense), Qwen3-MoE 3
  EXPECT_GT(projections, 0);
  // olmoe-like's scales are not all equal: some experts are hot, some cold.
  const std::vector<double> s = rec.at("row_scales").at("1").get<std::vector<double>>();
  EXPECT_GT(*std::max_element(s.begin(), s.end()), 2 * *std::min_element(s.begin(), s.end()));
}

TEST_P(RoutingProfileCli, AProfileModelRunsWithSkewedRoutes) {
  const Family& f = GetParam();
  test::TempDir tmp;
  // 200 positions of different tokens (a random model's greedy text loops,
  // and repeated tokens repeat routes): logits' prefill routes.
  std::string ids;
  for (int i = 0; i < 200; ++i) ids += (i ? "," : "") + std::to_string(i * 37 % 300);
  auto share = [&](const std::string& model, const std::string& name) {
    std::string out;
    const std::string trace = tmp.file(name + ".trace");
    const int rc = test::run_command(
        df("logits --model " + model + " --tokens " + ids + " --out " + tmp.file(name + ".npy") +
           " --route-trace " + trace),
        &out);
    if (rc != 0) throw std::runtime_error("logits failed: " + out);
    return top20_share(trace);
  };
  const double uniform = share(models(f).plain, "plain"), fork = share(models(f).fork, "fork");
  // k3-fork's target: the hottest 32 % serve 66.5 %, so the hottest 20 %
  // about 42 %. Without a profile: 20 % plus what 200 positions add by chance
  // and a random model's own skew (K3's random selection bias): 0.29-0.33 here.
  EXPECT_GT(fork, uniform + 0.07) << "k3-fork " << fork << ", uniform " << uniform;
  EXPECT_GT(fork, 0.38) << "k3-fork " << fork;
}

INSTANTIATE_TEST_SUITE_P(Families, RoutingProfileCli, testing::Values(kK3, kQwen),
                         [](const testing::TestParamInfo<Family>& i) { return std::string(i.param.name); });

TEST(RoutingProfile, UnknownNamesAndOtherFamiliesAreRefused) {
  test::TempDir tmp;
  std::string out;
  const std::string zipf = "make-model --arch k3 --preset tiny --out " + tmp.file("x") + " --routing-profile zipf";
  EXPECT_NE(test::run_command(df(zipf), &out), 0);
  EXPECT_NE(out.find("unknown profile \"zipf\""), std::string::npos) << out;
  for (const char* p : {"uniform", "k3-fork", "flat-balanced", "olmoe-like", "glm-like"})
    EXPECT_NE(out.find(p), std::string::npos) << p << " not named in: " << out;
  EXPECT_FALSE(fs::exists(tmp.file("x") + "/config.json"));
  EXPECT_NE(test::run_command(df("make-model --arch deepseek_v3 --preset tiny --out " + tmp.file("y") +
                                 " --routing-profile k3-fork"),
                              &out),
            0);
  EXPECT_NE(out.find("--routing-profile applies only to --arch k3 (kimi_k3) and qwen3_moe"), std::string::npos) << out;
}

// The fitted scales give the target popularity under a Monte Carlo written
// here (sort, not nth_element; its own seed): k3-fork's coverage at 32 % and
// 65 % of 128 experts, top-8.
TEST(RoutingProfile, FittedScalesGiveTheTargetCoverage) {
  const RoutingProfile& p = routing_profile("k3-fork");
  const int64_t E = 128, k = 8;
  const std::vector<double> s = fit_row_scales(target_popularity(p, E, k), k, 11);
  std::vector<double> count(E, 0.0);
  Rng rng(12345);
  std::vector<std::pair<double, int64_t>> z(E);
  const int draws = 8000;
  for (int d = 0; d < draws; ++d) {
    for (int64_t e = 0; e < E; ++e) z[e] = {s[e] * rng.normal(), e};
    std::sort(z.begin(), z.end(), std::greater<>());
    for (int64_t i = 0; i < k; ++i) count[z[i].second] += 1;
  }
  std::sort(count.rbegin(), count.rend());
  auto coverage = [&](double x) {
    double top = 0;
    for (int64_t e = 0; e < std::llround(x * E); ++e) top += count[e];
    return top / (static_cast<double>(draws) * k);
  };
  EXPECT_NEAR(coverage(0.32), 0.665, 0.02);
  EXPECT_NEAR(coverage(0.65), 0.961, 0.02);
}

}  // namespace
}  // namespace deltafin::routing_profile_cli_test
