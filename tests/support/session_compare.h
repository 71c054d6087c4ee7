// Bit-for-bit comparison of K3 sessions and logits, shared by the tests that
// check a schedule (chunked prefill, speculative verification) against plain
// one-token-at-a-time decoding.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/kimi_k3/model.h"
#include "model/kimi_k3/session.h"
#include "model/qwen3/qwen3_session.h"

namespace deltafin::test {

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Every committed state vector of the session: KDA conv windows and recurrent
// state, MLA keys and values.
inline void expect_same_state(K3Session& a, K3Session& b, const K3Config& c, const std::string& what) {
  ASSERT_EQ(a.length(), b.length()) << what;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    SCOPED_TRACE(what + ", layer " + std::to_string(l));
    EXPECT_TRUE(same_bits(a.kda(l).conv_q, b.kda(l).conv_q));
    EXPECT_TRUE(same_bits(a.kda(l).conv_k, b.kda(l).conv_k));
    EXPECT_TRUE(same_bits(a.kda(l).conv_v, b.kda(l).conv_v));
    EXPECT_TRUE(same_bits(a.kda(l).recurrent, b.kda(l).recurrent));
    EXPECT_TRUE(same_bits(a.mla(l).latent, b.mla(l).latent));
  }
}

// Two sessions of one model of any target family hold the same state:
// K3's by expect_same_state, a Qwen3 K/V cache row by row.
inline void expect_same_session(const ModelSession& a, const ModelSession& b, const std::string& what) {
  ASSERT_EQ(a.length(), b.length()) << what;
  if (auto* qa = dynamic_cast<const Qwen3Session*>(&a)) {
    auto* qb = dynamic_cast<const Qwen3Session*>(&b);
    ASSERT_NE(qb, nullptr) << what;
    const size_t n = static_cast<size_t>(a.length() * qa->kv_dim()) * sizeof(float);
    for (int64_t l = 0; l < qa->layers() && n > 0; ++l) {
      EXPECT_EQ(std::memcmp(qa->keys(l, 0), qb->keys(l, 0), n), 0) << what << ", keys of layer " << l;
      EXPECT_EQ(std::memcmp(qa->values(l, 0), qb->values(l, 0), n), 0) << what << ", values of layer " << l;
    }
    return;
  }
  auto& ka = const_cast<K3Session&>(k3_session(a));
  auto& kb = const_cast<K3Session&>(k3_session(b));
  expect_same_state(ka, kb, ka.config(), what);
}

}  // namespace deltafin::test
