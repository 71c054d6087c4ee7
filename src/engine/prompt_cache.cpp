#include "engine/prompt_cache.h"

#include <algorithm>

namespace deltafin {

namespace {

size_t common_prefix(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

uint64_t PromptCache::entry_bytes(const Entry& e) {
  uint64_t n = e.session->bytes() + e.tokens.size() * sizeof(uint32_t);
  for (const auto& m : e.boundaries) n += m->bytes();
  return n;
}

std::pair<std::list<PromptCache::Entry>::const_iterator, const SessionMark*> PromptCache::best(
    const std::vector<uint32_t>& prompt, const std::string& scope) const {
  auto best = entries_.cend();
  const SessionMark* best_mark = nullptr;
  if (prompt.size() < 2) return {best, best_mark};
  for (auto it = entries_.cbegin(); it != entries_.cend(); ++it) {
    if (it->scope != scope) continue;
    const int64_t usable = static_cast<int64_t>(std::min(common_prefix(it->tokens, prompt), prompt.size() - 1));
    for (const auto& m : it->boundaries)
      if (m->length <= usable && m->length > 0 && (!best_mark || m->length > best_mark->length))
        best = it, best_mark = m.get();
  }
  return {best, best_mark};
}

PromptCache::Restored PromptCache::restore(const std::vector<uint32_t>& prompt, const std::string& scope) {
  const auto [best_entry, best_mark] = best(prompt, scope);
  if (!best_mark) return {};
  Restored r{model_.copy_at(*best_entry->session, *best_mark), best_mark->length};
  entries_.splice(entries_.begin(), entries_, best_entry);
  return r;
}

int64_t PromptCache::reusable(const std::vector<uint32_t>& prompt, const std::string& scope) const {
  const SessionMark* mark = best(prompt, scope).second;
  return mark ? mark->length : 0;
}

void PromptCache::put(std::vector<uint32_t> tokens, std::unique_ptr<ModelSession> session,
                      std::vector<std::shared_ptr<SessionMark>> boundaries, const std::string& scope) {
  if (max_entries_ == 0) return;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->scope == scope && it->tokens.size() <= tokens.size() && common_prefix(it->tokens, tokens) == it->tokens.size()) {
      // Its marks are states after the same tokens, so they stay valid for
      // the new entry: keep them (a third request may branch there).
      for (auto& m : it->boundaries)
        if (std::none_of(boundaries.begin(), boundaries.end(), [&](const auto& b) { return b->length == m->length; }))
          boundaries.push_back(std::move(m));
      bytes_ -= it->bytes;
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(boundaries.begin(), boundaries.end(), [](const auto& a, const auto& b) { return a->length < b->length; });
  Entry e{scope, std::move(tokens), std::move(session), std::move(boundaries), 0};
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
