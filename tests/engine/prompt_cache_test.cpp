// PromptCache at the model level (no HTTP): a restored state continued over
// the rest of a prompt gives the same logits, bit for bit, as a cold run of
// the whole prompt; which boundary a restore picks; LRU eviction by count
// and by bytes; merging a prefix entry into its extension.
#include "engine/prompt_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "model/kimi_k3/load/loaded_k3.h"
#include "model/qwen3_moe/load/loaded_qwen3_moe.h"
#include "support/family_model.h"
#include "support/test_support.h"

using namespace deltafin;

namespace {

using Ids = std::vector<uint32_t>;

Ids concat(Ids a, const Ids& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Ids prefix(const Ids& a, size_t n) { return Ids(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n)); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every test runs on a tiny model of each target family.
class PromptCacheTest : public ::testing::TestWithParam<std::string> {
protected:
  LoadedModel& lm() { return test::shared_family_model(GetParam(), 23); }
  CausalModel& model() { return lm().causal(); }
  uint32_t vocab() { return static_cast<uint32_t>(model().summary().vocab); }
  Ids tokens(uint64_t seed, size_t n) { return test::random_tokens(seed, n, vocab()); }
  PromptCache make(size_t entries, uint64_t bytes) { return PromptCache(model(), entries, bytes); }

  // The last position's logits of `t` run through a fresh session in one pass.
  std::vector<float> cold_logits(const Ids& t) {
    auto s = model().new_session();
    return model().forward(*s, t, false).v;
  }

  // Consumes `t` in a fresh session, marking it at the given lengths
  // (ascending), and keeps it as the engine does.
  void put(PromptCache& cache, const Ids& t, const std::vector<size_t>& at) {
    auto s = model().new_session();
    std::vector<std::shared_ptr<SessionMark>> marks;
    size_t pos = 0;
    for (size_t b : at) {
      if (b > pos) model().forward(*s, std::span<const uint32_t>(t).subspan(pos, b - pos), false);
      pos = b;
      marks.push_back(model().mark(*s));
    }
    if (t.size() > pos) model().forward(*s, std::span<const uint32_t>(t).subspan(pos), false);
    cache.put(t, std::move(s), std::move(marks));
  }

  // Restores for `prompt`, runs the rest, and returns (r, last logits).
  std::pair<int64_t, std::vector<float>> warm_logits(PromptCache& cache, const Ids& prompt) {
    PromptCache::Restored r = cache.restore(prompt);
    std::unique_ptr<ModelSession> s = r.session ? std::move(r.session) : model().new_session();
    EXPECT_EQ(s->length(), r.length);
    std::span<const uint32_t> rest = std::span<const uint32_t>(prompt).subspan(static_cast<size_t>(r.length));
    return {r.length, model().forward(*s, rest, false).v};
  }

  // The bytes of one entry from the families' definitions: the session's
  // state for `length` positions, the tokens, and what each mark holds
  // beside the session. K3: the KDA state of every KDA layer (in the
  // session, and copied into each mark) and the latent rows (r_kv + d_rope
  // floats) of every MLA layer. Qwen3: keys and values (KV heads x head_dim
  // floats each) of every layer; a mark is a length and holds nothing.
  uint64_t expected_entry_bytes(size_t n_tokens, int64_t length, size_t marks) {
    const uint64_t tokens = n_tokens * sizeof(uint32_t);
    if (auto* k3 = dynamic_cast<LoadedK3*>(&lm())) {
      const K3Config& c = k3->config;
      uint64_t kda = 0, mla = 0;
      for (LayerKind k : c.layer_kinds) {
        if (k == LayerKind::KDA)
          kda += static_cast<uint64_t>(3 * c.kda_dim() * c.short_conv_kernel_size +
                                       c.kda_num_heads * c.kda_head_dim * c.kda_head_dim) *
                 sizeof(float);
        else
          mla += static_cast<uint64_t>(length * (c.kv_lora_rank + c.qk_rope_head_dim)) * sizeof(float);
      }
      return kda + mla + tokens + marks * kda;
    }
    const Qwen3Config& c = dynamic_cast<LoadedQwen3Moe&>(lm()).config.base;
    return static_cast<uint64_t>(c.num_hidden_layers * 2 * c.num_key_value_heads * c.head_dim * length) *
               sizeof(float) +
           tokens;
  }
};

constexpr uint64_t kPlenty = 1ull << 30;

}  // namespace

INSTANTIATE_TEST_SUITE_P(Families, PromptCacheTest, ::testing::ValuesIn(test::target_families()), test::family_name);

TEST_P(PromptCacheTest, RestoredStateContinuesBitForBitLikeAColdRun) {
  const Ids p = tokens(1, 20);
  const Ids q = concat(p, tokens(2, 7));
  PromptCache cache = make(4, kPlenty);
  put(cache, p, {19, 20});  // the prompt minus its last token, and its end
  ASSERT_EQ(cache.entries(), 1u);

  // An extension of the kept tokens continues from the end.
  auto [r, logits] = warm_logits(cache, q);
  EXPECT_EQ(r, 20);
  EXPECT_TRUE(same_bits(logits, cold_logits(q)));

  // The same prompt again continues from all but its last token, and the
  // entry is still intact after being restored from.
  for (int i = 0; i < 2; ++i) {
    auto [r2, again] = warm_logits(cache, p);
    EXPECT_EQ(r2, 19);
    EXPECT_TRUE(same_bits(again, cold_logits(p)));
  }
  auto [r3, logits3] = warm_logits(cache, q);
  EXPECT_EQ(r3, 20);
  EXPECT_TRUE(same_bits(logits3, logits));
}

TEST_P(PromptCacheTest, NoSharedBoundaryMeansNoRestore) {
  const Ids p = tokens(3, 16);
  PromptCache cache = make(4, kPlenty);
  put(cache, p, {15});
  // Diverges at 10: nothing was snapshotted at or below 10.
  Ids q = concat(prefix(p, 10), tokens(4, 6));
  ASSERT_NE(q[10], p[10]);
  EXPECT_EQ(cache.restore(q).length, 0);
  EXPECT_FALSE(cache.restore(q).session);
  EXPECT_EQ(cache.restore(tokens(5, 16)).length, 0);
}

TEST_P(PromptCacheTest, AOneTokenPromptNeverRestores) {
  const Ids p = tokens(6, 8);
  PromptCache cache = make(4, kPlenty);
  put(cache, p, {1, 3, 8});
  EXPECT_EQ(cache.restore(prefix(p, 1)).length, 0);
  // r < prompt size always: a prompt ending exactly at a boundary uses the one before.
  EXPECT_EQ(warm_logits(cache, prefix(p, 3)).first, 1);
  EXPECT_EQ(warm_logits(cache, prefix(p, 8)).first, 3);
  auto [r, logits] = warm_logits(cache, prefix(p, 2));
  EXPECT_EQ(r, 1);
  EXPECT_TRUE(same_bits(logits, cold_logits(prefix(p, 2))));
}

TEST_P(PromptCacheTest, RestorePicksTheLongestUsableBoundary) {
  const Ids p = tokens(7, 30);
  PromptCache cache = make(4, kPlenty);
  put(cache, p, {4, 8, 12, 30});

  struct Case {
    size_t shared;     // tokens shared with p before the prompt diverges
    int64_t expected;  // the longest boundary <= shared
  };
  for (const Case& c : {Case{10, 8}, Case{13, 12}, Case{12, 12}, Case{7, 4}, Case{3, 0}}) {
    SCOPED_TRACE(c.shared);
    Ids q = concat(prefix(p, c.shared), tokens(100 + c.shared, 5));
    if (q[c.shared] == p[c.shared]) q[c.shared] = (p[c.shared] + 1) % vocab();
    auto [r, logits] = warm_logits(cache, q);
    EXPECT_EQ(r, c.expected);
    EXPECT_TRUE(same_bits(logits, cold_logits(q)));
  }

  // Across entries: a second entry sharing only 10 tokens with p but
  // snapshotted at 9 beats the first entry's 4 for a prompt sharing 12 with
  // p (and 10 with the second).
  PromptCache two = make(4, kPlenty);
  put(two, p, {4});
  Ids other = concat(prefix(p, 10), tokens(8, 10));
  ASSERT_NE(other[10], p[10]);
  put(two, other, {9});
  ASSERT_EQ(two.entries(), 2u);
  Ids z = concat(prefix(p, 12), tokens(9, 4));
  auto [r, logits] = warm_logits(two, z);
  EXPECT_EQ(r, 9);
  EXPECT_TRUE(same_bits(logits, cold_logits(z)));
}

TEST_P(PromptCacheTest, LruEvictionByCount) {
  const Ids a = tokens(11, 10), b = tokens(12, 10), c = tokens(13, 10);
  PromptCache cache = make(2, kPlenty);
  put(cache, a, {9});
  put(cache, b, {9});
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(warm_logits(cache, a).first, 9);  // a is now the most recently used
  put(cache, c, {9});                         // so b, the least recent, goes
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(warm_logits(cache, b).first, 0);
  EXPECT_EQ(warm_logits(cache, a).first, 9);
  EXPECT_EQ(warm_logits(cache, c).first, 9);

  PromptCache none = make(0, kPlenty);
  put(none, a, {9});
  EXPECT_EQ(none.entries(), 0u);
  EXPECT_EQ(none.bytes(), 0u);
  EXPECT_EQ(warm_logits(none, a).first, 0);
}

TEST_P(PromptCacheTest, LruEvictionByBytes) {
  const Ids a = tokens(21, 12), b = tokens(22, 12), c = tokens(23, 12);
  PromptCache probe = make(8, kPlenty);
  put(probe, a, {11, 12});
  const uint64_t one = probe.bytes();
  EXPECT_EQ(one, expected_entry_bytes(12, 12, 2));

  PromptCache cache = make(8, 2 * one + one / 2);  // room for two entries of this shape
  put(cache, a, {11, 12});
  put(cache, b, {11, 12});
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(cache.bytes(), 2 * one);
  put(cache, c, {11, 12});
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(cache.bytes(), 2 * one);
  EXPECT_EQ(warm_logits(cache, a).first, 0);  // the oldest went
  EXPECT_EQ(warm_logits(cache, b).first, 11);
  EXPECT_EQ(warm_logits(cache, c).first, 11);

  // An entry larger than the whole budget is not kept, and evicts nothing.
  PromptCache small = make(8, one - 1);
  put(small, a, {11, 12});
  EXPECT_EQ(small.entries(), 0u);
  EXPECT_EQ(small.bytes(), 0u);
}

TEST_P(PromptCacheTest, APrefixEntryIsMergedIntoItsExtension) {
  const Ids p = tokens(31, 12);
  const Ids ext = concat(p, tokens(32, 8));  // p, then what was generated after it
  PromptCache cache = make(4, kPlenty);
  put(cache, p, {11});
  put(cache, ext, {19, 20});
  EXPECT_EQ(cache.entries(), 1u) << "the prefix entry should have been folded into its extension";
  EXPECT_EQ(cache.bytes(), expected_entry_bytes(20, 20, 3));

  // The carried-over snapshot at 11 still serves a prompt branching at 11.
  Ids branch = concat(prefix(p, 11), tokens(33, 5));
  if (branch[11] == p[11]) branch[11] = (p[11] + 1) % vocab();
  auto [r, logits] = warm_logits(cache, branch);
  EXPECT_EQ(r, 11);
  EXPECT_TRUE(same_bits(logits, cold_logits(branch)));
  // And the new ones serve the extension.
  auto [r2, logits2] = warm_logits(cache, concat(ext, tokens(34, 3)));
  EXPECT_EQ(r2, 20);
  EXPECT_TRUE(same_bits(logits2, cold_logits(concat(ext, tokens(34, 3)))));

  // The same tokens again replace the entry rather than adding one; an entry
  // that is not a prefix stays separate.
  put(cache, ext, {19, 20});
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.bytes(), expected_entry_bytes(20, 20, 3));
  put(cache, branch, {15});
  EXPECT_EQ(cache.entries(), 2u);
}
