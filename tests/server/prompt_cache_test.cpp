// PromptCache at the model level (no HTTP): a restored state continued over
// the rest of a prompt gives the same logits, bit for bit, as a cold run of
// the whole prompt; which boundary a restore picks; LRU eviction by count
// and by bytes; merging a prefix entry into its extension.
#include "server/prompt_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "engine/loaded_model.h"
#include "model/kimi_k3/generator.h"
#include "server/shared_test_model.h"
#include "support/test_support.h"

using namespace deltafin;

namespace {

using Ids = std::vector<uint32_t>;

LoadedK3& lm() { return test::shared_tiny_model(23); }
const K3Config& cfg() { return lm().config; }

Ids tokens(uint64_t seed, size_t n) { return test::random_tokens(seed, n, static_cast<uint32_t>(cfg().vocab_size)); }

Ids concat(Ids a, const Ids& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Ids prefix(const Ids& a, size_t n) { return Ids(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n)); }

// The last position's logits of `t` run through a fresh session in one pass.
std::vector<float> cold_logits(const Ids& t) {
  K3Session s(cfg());
  return lm().model->forward(s, t, false).v;
}

// A session that consumed `t`, with snapshots taken at the given lengths
// (ascending), as the generation service keeps them.
struct Consumed {
  K3Session session;
  std::vector<K3Session::Snapshot> snaps;
};
Consumed consume(const Ids& t, const std::vector<size_t>& at) {
  Consumed c{K3Session(cfg()), {}};
  size_t pos = 0;
  for (size_t b : at) {
    if (b > pos) lm().model->forward(c.session, std::span<const uint32_t>(t).subspan(pos, b - pos), false);
    pos = b;
    c.snaps.push_back(c.session.snapshot());
  }
  if (t.size() > pos) lm().model->forward(c.session, std::span<const uint32_t>(t).subspan(pos), false);
  return c;
}

void put(PromptCache& cache, const Ids& t, const std::vector<size_t>& at) {
  Consumed c = consume(t, at);
  cache.put(t, std::move(c.session), std::move(c.snaps));
}

// Restores for `prompt`, runs the rest, and returns (r, last logits).
std::pair<int64_t, std::vector<float>> warm_logits(PromptCache& cache, const Ids& prompt) {
  K3Session s(cfg());
  const int64_t r = cache.restore(prompt, s);
  EXPECT_EQ(s.length(), r);
  std::span<const uint32_t> rest = std::span<const uint32_t>(prompt).subspan(static_cast<size_t>(r));
  return {r, lm().model->forward(s, rest, false).v};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The bytes of one entry from the definitions: the session's caches (KDA
// state of every KDA layer, the latent rows (r_kv + d_rope floats) of every
// MLA layer for `length` positions), the tokens, and a KDA-state copy per snapshot.
uint64_t expected_entry_bytes(size_t n_tokens, int64_t length, size_t snapshots) {
  const K3Config& c = cfg();
  uint64_t kda = 0, mla = 0;
  for (LayerKind k : c.layer_kinds) {
    if (k == LayerKind::KDA)
      kda += static_cast<uint64_t>(3 * c.kda_dim() * c.short_conv_kernel_size +
                                   c.kda_num_heads * c.kda_head_dim * c.kda_head_dim) *
             sizeof(float);
    else
      mla += static_cast<uint64_t>(length * (c.kv_lora_rank + c.qk_rope_head_dim)) * sizeof(float);
  }
  return kda + mla + n_tokens * sizeof(uint32_t) + snapshots * kda;
}

constexpr uint64_t kPlenty = 1ull << 30;

}  // namespace

TEST(PromptCache, RestoredStateContinuesBitForBitLikeAColdRun) {
  const Ids p = tokens(1, 20);
  const Ids q = concat(p, tokens(2, 7));
  PromptCache cache(4, kPlenty);
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

TEST(PromptCache, NoSharedBoundaryMeansNoRestore) {
  const Ids p = tokens(3, 16);
  PromptCache cache(4, kPlenty);
  put(cache, p, {15});
  // Diverges at 10: nothing was snapshotted at or below 10.
  Ids q = concat(prefix(p, 10), tokens(4, 6));
  ASSERT_NE(q[10], p[10]);
  K3Session s(cfg());
  EXPECT_EQ(cache.restore(q, s), 0);
  EXPECT_EQ(s.length(), 0);
  EXPECT_EQ(cache.restore(tokens(5, 16), s), 0);
}

TEST(PromptCache, AOneTokenPromptNeverRestores) {
  const Ids p = tokens(6, 8);
  PromptCache cache(4, kPlenty);
  put(cache, p, {1, 3, 8});
  K3Session s(cfg());
  EXPECT_EQ(cache.restore(prefix(p, 1), s), 0);
  EXPECT_EQ(s.length(), 0);
  // r < prompt size always: a prompt ending exactly at a boundary uses the one before.
  EXPECT_EQ(warm_logits(cache, prefix(p, 3)).first, 1);
  EXPECT_EQ(warm_logits(cache, prefix(p, 8)).first, 3);
  auto [r, logits] = warm_logits(cache, prefix(p, 2));
  EXPECT_EQ(r, 1);
  EXPECT_TRUE(same_bits(logits, cold_logits(prefix(p, 2))));
}

TEST(PromptCache, RestorePicksTheLongestUsableBoundary) {
  const Ids p = tokens(7, 30);
  PromptCache cache(4, kPlenty);
  put(cache, p, {4, 8, 12, 30});

  struct Case {
    size_t shared;     // tokens shared with p before the prompt diverges
    int64_t expected;  // the longest boundary <= shared
  };
  for (const Case& c : {Case{10, 8}, Case{13, 12}, Case{12, 12}, Case{7, 4}, Case{3, 0}}) {
    SCOPED_TRACE(c.shared);
    Ids q = concat(prefix(p, c.shared), tokens(100 + c.shared, 5));
    if (q[c.shared] == p[c.shared]) q[c.shared] = (p[c.shared] + 1) % static_cast<uint32_t>(cfg().vocab_size);
    auto [r, logits] = warm_logits(cache, q);
    EXPECT_EQ(r, c.expected);
    EXPECT_TRUE(same_bits(logits, cold_logits(q)));
  }

  // Across entries: a second entry sharing only 10 tokens with p but
  // snapshotted at 9 beats the first entry's 4 for a prompt sharing 12 with
  // p (and 10 with the second).
  PromptCache two(4, kPlenty);
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

TEST(PromptCache, LruEvictionByCount) {
  const Ids a = tokens(11, 10), b = tokens(12, 10), c = tokens(13, 10);
  PromptCache cache(2, kPlenty);
  put(cache, a, {9});
  put(cache, b, {9});
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(warm_logits(cache, a).first, 9);  // a is now the most recently used
  put(cache, c, {9});                         // so b, the least recent, goes
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(warm_logits(cache, b).first, 0);
  EXPECT_EQ(warm_logits(cache, a).first, 9);
  EXPECT_EQ(warm_logits(cache, c).first, 9);

  PromptCache none(0, kPlenty);
  put(none, a, {9});
  EXPECT_EQ(none.entries(), 0u);
  EXPECT_EQ(none.bytes(), 0u);
  EXPECT_EQ(warm_logits(none, a).first, 0);
}

TEST(PromptCache, LruEvictionByBytes) {
  const Ids a = tokens(21, 12), b = tokens(22, 12), c = tokens(23, 12);
  PromptCache probe(8, kPlenty);
  put(probe, a, {11, 12});
  const uint64_t one = probe.bytes();
  EXPECT_EQ(one, expected_entry_bytes(12, 12, 2));

  PromptCache cache(8, 2 * one + one / 2);  // room for two entries of this shape
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
  PromptCache small(8, one - 1);
  put(small, a, {11, 12});
  EXPECT_EQ(small.entries(), 0u);
  EXPECT_EQ(small.bytes(), 0u);
}

TEST(PromptCache, APrefixEntryIsMergedIntoItsExtension) {
  const Ids p = tokens(31, 12);
  const Ids ext = concat(p, tokens(32, 8));  // p, then what was generated after it
  PromptCache cache(4, kPlenty);
  put(cache, p, {11});
  put(cache, ext, {19, 20});
  EXPECT_EQ(cache.entries(), 1u) << "the prefix entry should have been folded into its extension";
  EXPECT_EQ(cache.bytes(), expected_entry_bytes(20, 20, 3));

  // The carried-over snapshot at 11 still serves a prompt branching at 11.
  Ids branch = concat(prefix(p, 11), tokens(33, 5));
  if (branch[11] == p[11]) branch[11] = (p[11] + 1) % static_cast<uint32_t>(cfg().vocab_size);
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
