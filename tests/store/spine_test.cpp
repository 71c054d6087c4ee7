// Spine files: a bf16 store loads to exactly the checkpoint's weights; an
// int8-row store holds the §5.2 quantisation (checked against hand values and
// the kernel's product); damaged files are named errors.
#include "model/kimi_k3/family_checkpoint.h"
#include "store/spine_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "model/kimi_k3/tensors.h"
#include "model/kimi_k3/weights.h"
#include "kernels/matmul.h"
#include "store/setup.h"
#include "store/spine_layout.h"
#include "store/spine_writer.h"
#include "store/store_fixture.h"
#include "store/store_manifest.h"
#include "util/file.h"
#include "util/numeric.h"

using namespace deltafin;
using namespace deltafin::test;

namespace {

Matrix bf16_matrix(size_t rows, size_t cols, const std::vector<float>& values) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  for (float v : values) {
    uint16_t b = f32_to_bf16(v);
    EXPECT_EQ(bf16_to_f32(b), v) << "test value must be exact in BF16";
    m.storage.push_back(static_cast<uint8_t>(b & 0xff));
    m.storage.push_back(static_cast<uint8_t>(b >> 8));
  }
  return m;
}

std::vector<int> q_row(const Matrix& m, size_t r) {
  std::vector<int> out;
  for (size_t c = 0; c < m.cols; ++c) out.push_back(static_cast<int8_t>(m.storage[r * m.cols + c]));
  return out;
}

uint16_t scale_bits(const Matrix& m, size_t r) { return load_u16le(&m.scales[2 * r]); }

void expect_same_matrix(const Matrix& a, const Matrix& b, const std::string& what) {
  EXPECT_EQ(a.type, b.type) << what;
  EXPECT_EQ(a.rows, b.rows) << what;
  EXPECT_EQ(a.cols, b.cols) << what;
  EXPECT_TRUE(a.storage == b.storage) << what;
  EXPECT_TRUE(a.scales == b.scales) << what;
}

void expect_same_vec(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

// Calls fn(name, store matrix, checkpoint matrix) for every matrix, and
// compares every vector bit for bit.
template <typename Fn>
void compare_weights(const K3Weights& s, const K3Weights& k, Fn&& matrix) {
  matrix("embed", s.embed, k.embed);
  matrix("lm_head", s.lm_head, k.lm_head);
  expect_same_vec(s.final_norm, k.final_norm, "final_norm");
  expect_same_vec(s.s_out, k.s_out, "s_out");
  ASSERT_EQ(s.layers.size(), k.layers.size());
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const LayerWeights &a = s.layers[i], &b = k.layers[i];
    const std::string L = "layer " + std::to_string(i) + " ";
    expect_same_vec(a.input_norm, b.input_norm, L + "input_norm");
    expect_same_vec(a.post_attention_norm, b.post_attention_norm, L + "post_attention_norm");
    expect_same_vec(a.s_attn, b.s_attn, L + "s_attn");
    expect_same_vec(a.s_mlp, b.s_mlp, L + "s_mlp");
    if (a.kind == LayerKind::KDA) {
      const KdaWeights &x = a.kda, &y = b.kda;
      for (auto [n, p, q] : {std::tuple{"q", &x.q, &y.q}, {"k", &x.k, &y.k}, {"v", &x.v, &y.v}, {"g", &x.g, &y.g},
                             {"f_a", &x.f_a, &y.f_a}, {"f_b", &x.f_b, &y.f_b}, {"b", &x.b, &y.b}, {"o", &x.o, &y.o}})
        matrix(L + "kda." + n, *p, *q);
      for (auto [n, p, q] : {std::tuple{"a_log", &x.a_log, &y.a_log}, {"dt_bias", &x.dt_bias, &y.dt_bias},
                             {"q_conv", &x.q_conv, &y.q_conv}, {"k_conv", &x.k_conv, &y.k_conv},
                             {"v_conv", &x.v_conv, &y.v_conv}, {"o_norm", &x.o_norm, &y.o_norm}})
        expect_same_vec(*p, *q, L + n);
    } else {
      const MlaWeights &x = a.mla, &y = b.mla;
      for (auto [n, p, q] : {std::tuple{"q_a", &x.q_a, &y.q_a}, {"q_b", &x.q_b, &y.q_b}, {"kv_a", &x.kv_a, &y.kv_a},
                             {"kv_b", &x.kv_b, &y.kv_b}, {"g", &x.g, &y.g}, {"o", &x.o, &y.o}})
        matrix(L + "mla." + n, *p, *q);
      expect_same_vec(x.q_a_norm, y.q_a_norm, L + "q_a_norm");
      expect_same_vec(x.kv_a_norm, y.kv_a_norm, L + "kv_a_norm");
    }
    if (i == 0) {
      matrix(L + "dense.gate", a.dense.gate, b.dense.gate);
      matrix(L + "dense.up", a.dense.up, b.dense.up);
      matrix(L + "dense.down", a.dense.down, b.dense.down);
    } else {
      const MoeWeights &x = a.moe, &y = b.moe;
      for (auto [n, p, q] : {std::tuple{"router", &x.router, &y.router},
                             {"latent_down", &x.latent_down, &y.latent_down},
                             {"latent_up", &x.latent_up, &y.latent_up},
                             {"shared_gate", &x.shared_gate, &y.shared_gate},
                             {"shared_up", &x.shared_up, &y.shared_up},
                             {"shared_down", &x.shared_down, &y.shared_down}})
        matrix(L + "moe." + n, *p, *q);
      expect_same_vec(x.correction_bias, y.correction_bias, L + "correction_bias");
      expect_same_vec(x.latent_norm, y.latent_norm, L + "latent_norm");
    }
  }
}

}  // namespace

TEST(Int8Row, TargetsByName) {
  EXPECT_TRUE(int8_row_target("language_model.lm_head.weight"));
  EXPECT_TRUE(int8_row_target("language_model.model.layers.3.self_attn.q_proj.weight"));
  EXPECT_TRUE(int8_row_target("language_model.model.layers.3.block_sparse_moe.gate.weight"));
  EXPECT_TRUE(int8_row_target("language_model.model.layers.3.block_sparse_moe.shared_experts.down_proj.weight"));
  EXPECT_TRUE(int8_row_target("language_model.model.layers.0.mlp.up_proj.weight"));
  EXPECT_FALSE(int8_row_target("language_model.model.embed_tokens.weight"));
  EXPECT_FALSE(int8_row_target("language_model.model.layers.3.self_attention_res_proj.weight"));
  EXPECT_FALSE(int8_row_target("language_model.model.layers.3.input_layernorm.weight"));
  EXPECT_FALSE(int8_row_target("language_model.model.layers.3.self_attn.q_conv1d.weight"));
  EXPECT_FALSE(int8_row_target("language_model.model.layers.3.block_sparse_moe.experts.5.w1.weight_packed"));
  EXPECT_FALSE(int8_row_target("language_model.model.layers.3.block_sparse_moe.gate.e_score_correction_bias"));
  EXPECT_FALSE(int8_row_target("vision_tower.blocks.0.attn.proj.weight"));
}

TEST(Int8Row, HandComputedRows) {
  // Row 0: max|x| = 127 -> scale 1, 0.5 rounds half to even (0).
  // Row 1: all zero -> scale 1.0, q = 0.
  // Row 2: max 254 -> scale 2: x/2 = 2.5, 3.5, -2.5, -1.5 round half to even.
  // Row 3: max 100 -> scale 100/127 = 0.7874016 (fp32); f16 = 0x3A4D (0.78759765625);
  //        q = 10/s = 12.7 -> 13, -37/s = -46.99 -> -47, 0.375/s = 0.476 -> 0.
  Matrix m = bf16_matrix(4, 5, {1, -2, 0.5f, 127, 0,
                                0, 0, 0, 0, 0,
                                5, 7, -5, -3, 254,
                                100, 10, -37, 0.375f, -100});
  Matrix q = quantize_int8_row("test.weight", m);
  EXPECT_EQ(q.type, WeightType::Int8Row);
  EXPECT_EQ(q.rows, 4u);
  EXPECT_EQ(q.cols, 5u);
  EXPECT_EQ(q_row(q, 0), (std::vector<int>{1, -2, 0, 127, 0}));
  EXPECT_EQ(q_row(q, 1), (std::vector<int>{0, 0, 0, 0, 0}));
  EXPECT_EQ(q_row(q, 2), (std::vector<int>{2, 4, -2, -2, 127}));
  EXPECT_EQ(q_row(q, 3), (std::vector<int>{127, 13, -47, 0, -127}));
  EXPECT_EQ(scale_bits(q, 0), 0x3C00);  // 1.0
  EXPECT_EQ(scale_bits(q, 1), 0x3C00);  // 1.0 for an all-zero row
  EXPECT_EQ(scale_bits(q, 2), 0x4000);  // 2.0
  EXPECT_EQ(scale_bits(q, 3), 0x3A4D);
  EXPECT_EQ(f16_to_f32(0x3A4D), 0.78759765625f);

  // The kernel's product (k3-model.md §5.2): y[r] = (sum_c x[c] q[r,c]) * f32(f16(scale_r)).
  // Integer-valued x keeps every partial sum exact, so any order gives the same bits.
  const std::vector<float> x = {1, 2, -1, 4, 3};
  std::vector<float> y(4);
  matmul(q.view(), x.data(), 1, y.data());
  for (size_t r = 0; r < 4; ++r) {
    float dot = 0;
    std::vector<int> qr = q_row(q, r);
    for (size_t c = 0; c < 5; ++c) dot += x[c] * static_cast<float>(qr[c]);
    EXPECT_EQ(y[r], dot * f16_to_f32(scale_bits(q, r))) << "row " << r;
    for (size_t c = 0; c < 5; ++c)
      EXPECT_EQ(weight_at(q.view(), r, c), static_cast<float>(qr[c]) * f16_to_f32(scale_bits(q, r)));
  }
  EXPECT_EQ(y[3], (127 + 26 + 47 + 0 - 381) * 0.78759765625f);
}

TEST(Int8Row, NonFiniteValueNamesTensorAndRow) {
  Matrix m = bf16_matrix(3, 2, {1, 2, 3, 4, 5, 6});
  const uint16_t inf = 0x7F80;
  m.storage[2 * 5] = inf & 0xff;  // row 2, column 1
  m.storage[2 * 5 + 1] = inf >> 8;
  EXPECT_FAILS_WITH(quantize_int8_row("language_model.lm_head.weight", m), "language_model.lm_head.weight", "row 2",
                    "column 1");
  // A scale beyond the f16 range cannot be stored.
  Matrix big = bf16_matrix(1, 2, {17179869184.0f, 0});  // 2^34: scale 1.35e8 > 65504
  EXPECT_FAILS_WITH(quantize_int8_row("big.weight", big), "big.weight", "row 0", "f16");
}

TEST(SpineStore, Bf16StoreLoadsExactlyTheCheckpointWeights) {
  TempDir root;
  SetupOptions o = copy_of_tiny_store(root.path());
  const StoreManifest m = load_store_manifest(o.store);
  EXPECT_EQ(m.spine_format, SpineFormat::BF16);
  ASSERT_EQ(m.spine_files.size(), 11u);  // globals + 10 layers
  EXPECT_EQ(m.spine_files[0].path, "spine/globals.bin");
  EXPECT_EQ(m.spine_files[4].path, "spine/L003.bin");
  for (const SpineFileEntry& f : m.spine_files) {
    EXPECT_EQ(f.bytes % 4096, 0u) << f.path;
    EXPECT_EQ(std::filesystem::file_size(o.store + "/" + f.path), f.bytes) << f.path;
  }
  auto source = open_store_spine(o.store, m);
  const K3Weights s = load_k3_weights(tiny_checkpoint().config, *source);
  const K3Weights k = load_k3_weights(tiny_checkpoint());
  compare_weights(s, k, [](const std::string& n, const Matrix& a, const Matrix& b) {
    EXPECT_EQ(a.type, WeightType::BF16) << n;
    expect_same_matrix(a, b, n);
  });
  EXPECT_EQ(s.bytes, k.bytes);
  EXPECT_EQ(m.spine_bytes, s.bytes) << "manifest spine_bytes = resident bytes once loaded";
}

TEST(SpineStore, Int8StoreHoldsTheRowQuantisation) {
  TempDir root;
  SetupOptions o = tiny_setup_options(root.path(), make_drives(root.path(), 1));
  o.spine = "int8";
  SetupReport r = run_setup(o);
  EXPECT_EQ(r.spine_format, "int8-row");
  const StoreManifest m = load_store_manifest(o.store);
  EXPECT_EQ(m.spine_format, SpineFormat::Int8Row);
  auto source = open_store_spine(o.store, m);
  const K3Weights s = load_k3_weights(tiny_checkpoint().config, *source);
  const K3Weights k = load_k3_weights(tiny_checkpoint());
  int quantised = 0;
  compare_weights(s, k, [&](const std::string& n, const Matrix& a, const Matrix& b) {
    if (n == "embed") {  // a lookup reads one row: kept BF16
      expect_same_matrix(a, b, n);
      return;
    }
    EXPECT_EQ(a.type, WeightType::Int8Row) << n;
    expect_same_matrix(a, quantize_int8_row(n, b), n);
    ++quantised;
  });
  EXPECT_GT(quantised, 50);
  EXPECT_EQ(m.spine_bytes, s.bytes);
  EXPECT_LT(s.bytes, k.bytes);
}

TEST(SpineStore, DamagedSpineFilesAreNamed) {
  TempDir root;
  SetupOptions o = copy_of_tiny_store(root.path());
  StoreManifest m = load_store_manifest(o.store);
  const std::string path = o.store + "/spine/L002.bin";

  // A tensor in none of the files: named.
  StoreManifest fewer = m;
  fewer.spine_files.pop_back();  // drop the last layer's file
  auto source = open_store_spine(o.store, fewer);
  EXPECT_FAILS_WITH(source->matrix("language_model.model.layers.9.self_attn.q_a_proj.weight"),
                    "language_model.model.layers.9.self_attn.q_a_proj.weight");
  EXPECT_FAILS_WITH(source->matrix("language_model.model.layers.1.self_attn.A_log"), "A_log", "not a BF16, I8 or F8_E4M3 matrix");

  std::filesystem::resize_file(path, m.spine_files[3].bytes - 4096);
  EXPECT_FAILS_WITH(open_store_spine(o.store, m), path, "store.json records");

  std::string bytes = read_all(o.store + "/spine/L001.bin");
  bytes[3] = 'X';
  write_file_atomic(path, bytes);
  m.spine_files[3].bytes = bytes.size();
  EXPECT_FAILS_WITH(open_store_spine(o.store, m), path, "magic");

  // A header whose tensor runs past the end of the file.
  std::vector<SpineTensor> t = {{"a", DType::BF16, {4, 4}, 0, 32}};
  uint64_t size = 0;
  std::string head = layout_spine_file(SpineFormat::BF16, t, &size);
  write_file_atomic(path, head);  // payload missing
  EXPECT_FAILS_WITH(read_spine_header(File::open_read(path)), path, "'a'", "outside");

}

TEST(SpineLayout, PayloadsAligned) {
  std::vector<SpineTensor> t = {{"a", DType::BF16, {3, 5}, 0, 30}, {"b", DType::F32, {7}, 0, 28},
                                {"c", DType::I8, {5000}, 0, 5000}, {spine_scale_name("c"), DType::F16, {1}, 0, 2}};
  uint64_t size = 0;
  std::string head = layout_spine_file(SpineFormat::Int8Row, t, &size);
  EXPECT_EQ(std::string(head.data(), 8), "DFSPINE1");
  EXPECT_EQ(head.size(), 4096u);
  EXPECT_EQ(t[0].offset, 4096u);
  EXPECT_EQ(t[1].offset, 8192u);
  EXPECT_EQ(t[2].offset, 12288u);
  EXPECT_EQ(t[3].offset, 12288u + 8192u);
  EXPECT_EQ(size, 12288u + 8192u + 4096u);
  // Many tensors: the header outgrows one page and everything moves after it.
  std::vector<SpineTensor> many;
  for (int i = 0; i < 200; ++i) many.push_back({"tensor_" + std::to_string(i), DType::BF16, {2}, 0, 4});
  head = layout_spine_file(SpineFormat::BF16, many, &size);
  EXPECT_GT(head.size(), 4096u);
  EXPECT_EQ(head.size() % 4096, 0u);
  EXPECT_EQ(many[0].offset, head.size());
  EXPECT_EQ(size, head.size() + 200 * 4096u);
}

TEST(SpineWriter, OutputDoesNotDependOnTheReadChunk) {
  // Small chunks split every copy and every quantised matrix into many row
  // blocks; the bytes must be the same as in one piece.
  const K3FamilyCheckpoint k(tiny_checkpoint());
  for (SpineFormat f : {SpineFormat::BF16, SpineFormat::Int8Row}) {
    const SpinePlan plan = plan_spine(k, f);
    for (size_t i : {size_t(0), size_t(2), plan.files.size() - 1}) {
      std::string whole, pieces;
      generate_spine_file(k, plan.files[i], [&](const uint8_t* p, size_t n) { whole.append(reinterpret_cast<const char*>(p), n); });
      generate_spine_file(
          k, plan.files[i], [&](const uint8_t* p, size_t n) { pieces.append(reinterpret_cast<const char*>(p), n); }, 300);
      EXPECT_EQ(whole.size(), plan.files[i].bytes) << plan.files[i].path;
      EXPECT_TRUE(whole == pieces) << spine_format_name(f) << " " << plan.files[i].path;
    }
  }
}
