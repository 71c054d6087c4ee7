// What `deltafin logits` writes, against the independent float64 references
// (tests/kimi_k3/reference_k3.h, tests/qwen3/reference_qwen3.h), for every
// target family: the binary makes a tiny checkpoint, writes the logits of a
// short token list resident (--model) and streamed from a store (setup, then
// --store), and every position of the .npy must match the reference computed
// here from the same checkpoint (relative L2 within the tolerance of the
// in-process reference tests, the same argmax), the two files byte for byte
// equal. The other logits tests compare one file with another or check the
// shape only, which an engine writing zeros would pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "model/kimi_k3/checkpoint.h"
#include "kimi_k3/reference_k3.h"
#include "qwen3/reference_qwen3.h"
#include "support/family_model.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/file.h"

using namespace deltafin;
namespace fs = std::filesystem;

namespace {

// As in forward_test.cpp and qwen3_moe_test.cpp: fp32 against float64 on the
// same weights is a few 1e-7 relative; a wrong route, norm or position is O(1).
constexpr double kTolerance = 1e-5;
// Near-ties (an expert choice, the top logit) the fp32 path could decide
// either way are kept out of the fixed token list instead of being skipped.
constexpr double kClearMargin = 1e-4;
constexpr size_t kPositions = 10;

using test::df;

::testing::AssertionResult runs(const std::string& command) {
  std::string out;
  const int rc = test::run_command(command, &out);
  if (rc == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << command << "\nexit status " << rc << "\n" << out;
}

// A float32 [rows, cols] .npy as the binary writes it (format 1.0, C order,
// little-endian), read without the writer's code; fails on anything else.
struct Npy {
  size_t rows = 0, cols = 0;
  std::vector<float> v;
  const float* row(size_t t) const { return v.data() + t * cols; }
};

Npy read_npy_f32(const std::string& path) {
  static_assert(std::endian::native == std::endian::little, "the .npy data is little-endian float32");
  const std::string bytes = read_text_file(path);
  if (bytes.size() < 10 || bytes.compare(0, 8, "\x93NUMPY\x01\x00", 8) != 0) fail(path, ": not a .npy 1.0 file");
  const size_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  if (bytes.size() < 10 + header_len) fail(path, ": header runs past the end");
  const std::string header = bytes.substr(10, header_len);
  if (header.find("'descr': '<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    fail(path, ": not C-order little-endian float32: ", header);
  Npy n;
  const size_t shape = header.find("'shape': (");
  if (shape == std::string::npos ||
      std::sscanf(header.c_str() + shape, "'shape': (%zu, %zu)", &n.rows, &n.cols) != 2)
    fail(path, ": no two-dimensional shape in ", header);
  const size_t data = bytes.size() - 10 - header_len;
  if (data != n.rows * n.cols * sizeof(float))
    fail(path, ": ", data, " data bytes for shape (", n.rows, ", ", n.cols, ")");
  n.v.resize(n.rows * n.cols);
  std::memcpy(n.v.data(), bytes.data() + 10 + header_len, data);
  return n;
}

double relative_l2(const float* got, const double* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
  return std::sqrt(num / den);
}

// make-model's arguments for a tiny checkpoint of `family`, and its vocabulary
// (the presets' own: K3 tiny 768, Qwen3-MoE tiny 320).
struct Tiny {
  std::string args;
  size_t vocab = 0;
};

Tiny tiny(const std::string& family) {
  if (family == "kimi_k3") return {"--arch kimi_k3 --preset tiny --seed 7", 768};
  if (family == "qwen3_moe") return {"--arch qwen3_moe --preset tiny --seed 7", 320};
  ADD_FAILURE() << "no tiny checkpoint for family " << family << ": add it here and a float64 reference below";
  return {};
}

// The reference's logits of every position, [T * vocab]. K3's routing
// (sigmoid scores plus a bias, top-k) is checked to be clear of near-ties, so
// the reference's own expert choice is the one the fp32 path must make
// (k3-model.md §12). Qwen3-MoE's reference does not report its margins; a
// different expert there would show as an O(1) error at that position.
std::vector<double> reference_logits(const std::string& family, const std::string& ckpt,
                                     const std::vector<uint32_t>& tokens) {
  if (family == "kimi_k3") {
    const test::ReferenceResult r = test::reference_forward(load_k3_checkpoint(ckpt), tokens);
    for (size_t l = 1; l < r.route_margins.size(); ++l)
      for (size_t t = 0; t < tokens.size(); ++t)
        EXPECT_GT(r.route_margins[l][t], kClearMargin)
            << "layer " << l << " position " << t << ": an expert near-tie; choose other tokens or another seed";
    std::vector<double> all;
    for (const auto& row : r.logits) all.insert(all.end(), row.begin(), row.end());
    return all;
  }
  if (family == "qwen3_moe") return test::ReferenceQwen3(ckpt).logits(tokens);
  ADD_FAILURE() << "no float64 reference for family " << family;
  return {};
}

}  // namespace

class LogitsVsFloat64Reference : public ::testing::TestWithParam<std::string> {};

TEST_P(LogitsVsFloat64Reference, ResidentAndStreamedMatchEveryPosition) {
  const std::string family = GetParam();
  test::TempDir tmp;
  const std::string ckpt = tmp.file("ckpt"), store = tmp.file("store"), drive = tmp.file("drive0");
  const Tiny m = tiny(family);
  ASSERT_GT(m.vocab, 0u);
  ASSERT_TRUE(runs(df("make-model --quiet " + m.args + " --out " + ckpt)));
  fs::create_directories(drive);
  // bf16 spine: the checkpoint's own weights (an int8 spine would round them).
  // Four copy threads: each expert file is fsynced, and on the development
  // machine one thread took 1.6 s for K3 tiny's 144 files, four 0.3 s.
  ASSERT_TRUE(runs(df("setup --quiet --from " + ckpt + " --store " + store + " --drives " + drive +
                      " --drive-mbps 1500 --spine bf16 --threads 4")));

  const size_t V = m.vocab;
  const std::vector<uint32_t> tokens = test::random_tokens(23, kPositions, static_cast<uint32_t>(V));
  std::string list;
  for (uint32_t t : tokens) {
    if (!list.empty()) list += ',';
    list += std::to_string(t);
  }

  ASSERT_TRUE(runs(df("logits --model " + ckpt + " --tokens " + list + " --out " + tmp.file("resident.npy"))));
  ASSERT_TRUE(runs(df("logits --store " + store + " --tokens " + list + " --out " + tmp.file("streamed.npy"))));
  {
    const std::string resident = read_text_file(tmp.file("resident.npy"));
    const std::string streamed = read_text_file(tmp.file("streamed.npy"));
    const auto [r, s] = std::mismatch(resident.begin(), resident.end(), streamed.begin(), streamed.end());
    EXPECT_TRUE(r == resident.end() && s == streamed.end())
        << "the streamed .npy (" << streamed.size() << " bytes) differs from the resident one (" << resident.size()
        << " bytes) from byte " << (r - resident.begin());
  }

  const std::vector<double> want = reference_logits(family, ckpt, tokens);
  ASSERT_EQ(want.size(), tokens.size() * V);
  // Each position's top logit is clear of the runner-up, so the binary's
  // argmax must be the reference's.
  for (size_t t = 0; t < tokens.size(); ++t) {
    std::vector<double> sorted(want.begin() + static_cast<std::ptrdiff_t>(t * V),
                               want.begin() + static_cast<std::ptrdiff_t>((t + 1) * V));
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    EXPECT_GT(sorted[0] - sorted[1], kClearMargin) << "position " << t << ": a near-tie at the top; choose other tokens";
  }
  for (const char* file : {"resident.npy", "streamed.npy"}) {
    SCOPED_TRACE(file);
    const Npy got = read_npy_f32(tmp.file(file));
    ASSERT_EQ(got.rows, tokens.size());
    ASSERT_EQ(got.cols, V);
    double worst = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const double* ref = want.data() + t * V;
      const double e = relative_l2(got.row(t), ref, V);
      worst = std::max(worst, e);
      EXPECT_LE(e, kTolerance) << "position " << t;
      EXPECT_EQ(std::max_element(got.row(t), got.row(t) + V) - got.row(t), std::max_element(ref, ref + V) - ref)
          << "position " << t;
    }
    std::printf("[ reference ] %s %s: worst relative L2 over %zu positions %.3g\n", family.c_str(), file,
                tokens.size(), worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, LogitsVsFloat64Reference, ::testing::ValuesIn(test::target_families()),
                         test::family_name);
