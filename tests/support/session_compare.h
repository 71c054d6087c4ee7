// Bit-for-bit comparison of K3 sessions and logits, shared by the tests that
// check a schedule (chunked prefill, speculative verification) against plain
// one-token-at-a-time decoding.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/kimi_k3/session.h"

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

}  // namespace deltafin::test
