#include "server/prompt_cache.h"

#include <algorithm>

namespace deltafin {

namespace {

size_t common_prefix(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

uint64_t snapshot_bytes(const K3Session::Snapshot& s) {
  uint64_t n = 0;
  for (const KdaState& k : s.kda) n += (k.conv_q.size() + k.conv_k.size() + k.conv_v.size() + k.recurrent.size()) * sizeof(float);
  return n;
}

}  // namespace

uint64_t PromptCache::entry_bytes(const Entry& e) {
  uint64_t n = e.session.bytes() + e.tokens.size() * sizeof(uint32_t);
  for (const auto& s : e.boundaries) n += snapshot_bytes(s);
  return n;
}

int64_t PromptCache::restore(const std::vector<uint32_t>& prompt, K3Session& session) {
  if (prompt.size() < 2) return 0;
  auto best = entries_.end();
  const K3Session::Snapshot* best_snap = nullptr;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const int64_t usable = static_cast<int64_t>(std::min(common_prefix(it->tokens, prompt), prompt.size() - 1));
    for (const auto& s : it->boundaries)
      if (s.length <= usable && s.length > 0 && (!best_snap || s.length > best_snap->length)) best = it, best_snap = &s;
  }
  if (!best_snap) return 0;
  session = best->session;  // a copy: the entry stays usable for the next request
  session.restore(*best_snap);
  entries_.splice(entries_.begin(), entries_, best);
  return best_snap->length;
}

void PromptCache::put(std::vector<uint32_t> tokens, K3Session session, std::vector<K3Session::Snapshot> boundaries) {
  if (max_entries_ == 0) return;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->tokens.size() <= tokens.size() && common_prefix(it->tokens, tokens) == it->tokens.size()) {
      // Its snapshots are states after the same tokens, so they stay valid
      // for the new entry: keep them (a third request may branch there).
      for (auto& s : it->boundaries)
        if (std::none_of(boundaries.begin(), boundaries.end(), [&](const auto& b) { return b.length == s.length; }))
          boundaries.push_back(std::move(s));
      bytes_ -= it->bytes;
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(boundaries.begin(), boundaries.end(), [](const auto& a, const auto& b) { return a.length < b.length; });
  Entry e{std::move(tokens), std::move(session), std::move(boundaries), 0};
  e.bytes = entry_bytes(e);
  if (e.bytes > max_bytes_) return;  // larger than the whole budget: not kept
  bytes_ += e.bytes;
  entries_.push_front(std::move(e));
  evict_to_fit();
}

void PromptCache::evict_to_fit() {
  while (!entries_.empty() && (entries_.size() > max_entries_ || bytes_ > max_bytes_)) {
    bytes_ -= entries_.back().bytes;
    entries_.pop_back();
  }
}

}  // namespace deltafin
