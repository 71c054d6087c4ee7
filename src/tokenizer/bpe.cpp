#include "tokenizer/bpe.h"

#include <functional>
#include <queue>

#include "util/error.h"

namespace deltafin {

namespace {

// Pieces up to this many bytes use tiktoken's own loop (a linear scan per
// merge is cheapest when short); longer ones use the heap.
constexpr size_t kSimpleMergeMaxBytes = 64;

size_t hash_bytes(std::string_view bytes) { return std::hash<std::string_view>{}(bytes); }

}  // namespace

RankTable::RankTable(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  size_t capacity = 16;
  while (capacity < tokens_.size() * 2) capacity *= 2;  // load factor <= 1/2
  slots_.assign(capacity, kNoRank);
  mask_ = capacity - 1;
  for (uint32_t rank = 0; rank < tokens_.size(); ++rank) {
    size_t slot = hash_bytes(tokens_[rank]) & mask_;
    while (slots_[slot] != kNoRank) {
      if (tokens_[slots_[slot]] == tokens_[rank])
        fail("rank table: token of rank ", rank, " duplicates the token of rank ", slots_[slot]);
      slot = (slot + 1) & mask_;
    }
    slots_[slot] = rank;
  }
}

uint32_t RankTable::find(std::string_view bytes) const {
  if (slots_.empty()) return kNoRank;
  size_t slot = hash_bytes(bytes) & mask_;
  while (slots_[slot] != kNoRank) {
    if (tokens_[slots_[slot]] == bytes) return slots_[slot];
    slot = (slot + 1) & mask_;
  }
  return kNoRank;
}

std::vector<uint32_t> bpe_merge_simple(std::string_view piece, const RankTable& ranks) {
  // tiktoken's _byte_pair_merge: parts[i] = (start offset, rank of the pair
  // formed by part i and part i+1), with two sentinels at the end.
  struct Part {
    size_t start;
    uint32_t rank;
  };
  const size_t n = piece.size();
  if (n == 0) return {};
  std::vector<Part> parts;
  parts.reserve(n + 1);
  for (size_t i = 0; i + 1 < n; ++i) parts.push_back({i, ranks.find(piece.substr(i, 2))});
  parts.push_back({n - 1, kNoRank});
  parts.push_back({n, kNoRank});

  // Rank of the token that parts i and i+1 would form once part i+1 has
  // absorbed part i+2 (called before that removal, as tiktoken does).
  auto rank_after_merge = [&](size_t i) {
    if (i + 3 >= parts.size()) return kNoRank;
    return ranks.find(piece.substr(parts[i].start, parts[i + 3].start - parts[i].start));
  };
  while (true) {
    uint32_t best = kNoRank;
    size_t best_i = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i)
      if (parts[i].rank < best) {  // strict: the leftmost of equal ranks wins
        best = parts[i].rank;
        best_i = i;
      }
    if (best == kNoRank) break;
    if (best_i > 0) parts[best_i - 1].rank = rank_after_merge(best_i - 1);
    parts[best_i].rank = rank_after_merge(best_i);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best_i) + 1);
  }

  std::vector<uint32_t> out;
  out.reserve(parts.size() - 1);
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    out.push_back(ranks.find(piece.substr(parts[i].start, parts[i + 1].start - parts[i].start)));
  return out;
}

namespace {

// The heap merge for any priority: rank_of_join(start, mid, end) ranks joining
// the parts [start, mid) and [mid, end) of the piece.
template <typename PairRank>
std::vector<uint32_t> merge_heap(std::string_view piece, const RankTable& ranks, const PairRank& rank_of_join) {
  // Parts form a linked list over byte positions; a part keeps its start when
  // it absorbs its right neighbour, so (pair rank, start) orders candidate
  // merges exactly as tiktoken's scan does (lowest rank, then leftmost).
  // Heap entries go stale when a neighbour merges; a per-part version number
  // recognises them.
  const size_t n = piece.size();
  if (n == 0) return {};
  constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> next(n), prev(n);
  std::vector<uint32_t> version(n, 0);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : kNone;
    prev[i] = i > 0 ? i - 1 : kNone;
  }
  auto end_of = [&](size_t part) { return next[part] == kNone ? n : next[part]; };
  auto pair_rank = [&](size_t part) {
    if (next[part] == kNone) return kNoRank;
    return rank_of_join(part, next[part], end_of(next[part]));
  };

  struct Candidate {
    uint32_t rank;
    size_t start;
    uint32_t version;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : start > o.start; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](size_t part) {
    uint32_t r = pair_rank(part);
    if (r != kNoRank) heap.push({r, part, version[part]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);

  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    if (!alive[c.start] || version[c.start] != c.version) continue;
    size_t right = next[c.start];
    alive[right] = false;
    next[c.start] = next[right];
    if (next[right] != kNone) prev[next[right]] = c.start;
    ++version[c.start];
    push(c.start);
    if (prev[c.start] != kNone) {
      ++version[prev[c.start]];
      push(prev[c.start]);
    }
  }

  std::vector<uint32_t> out;
  for (size_t part = 0; part != kNone; part = next[part])
    out.push_back(ranks.find(piece.substr(part, end_of(part) - part)));
  return out;
}

}  // namespace

std::vector<uint32_t> bpe_merge_heap(std::string_view piece, const RankTable& ranks) {
  // tiktoken: the priority of a join is the rank of the joined bytes.
  return merge_heap(piece, ranks,
                    [&](size_t start, size_t, size_t end) { return ranks.find(piece.substr(start, end - start)); });
}

std::vector<uint32_t> bpe_merge_heap_pairs(
    std::string_view piece, const RankTable& ranks,
    const std::function<uint32_t(std::string_view left, std::string_view right)>& pair_rank) {
  return merge_heap(piece, ranks, [&](size_t start, size_t mid, size_t end) {
    return pair_rank(piece.substr(start, mid - start), piece.substr(mid, end - mid));
  });
}

void bpe_encode(std::string_view piece, const RankTable& ranks, std::vector<uint32_t>& out) {
  if (piece.empty()) return;
  uint32_t whole = ranks.find(piece);
  if (whole != kNoRank) {
    out.push_back(whole);
    return;
  }
  std::vector<uint32_t> ids =
      piece.size() <= kSimpleMergeMaxBytes ? bpe_merge_simple(piece, ranks) : bpe_merge_heap(piece, ranks);
  for (uint32_t id : ids) {
    // Every part is a single byte or a merge result, so it has a rank unless
    // a single byte is missing from the table.
    if (id == kNoRank) fail("BPE: a byte of the piece has no rank (the rank table lacks a single byte)");
    out.push_back(id);
  }
}

}  // namespace deltafin
