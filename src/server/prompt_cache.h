// Prompt reuse: session states kept after requests, so a later request whose
// tokens start with the same prefix continues from the kept state instead of
// recomputing it. The output is the same as a cold run by construction: a
// state is only reused at a length where it was snapshotted exactly (KDA
// state is recurrent, so it can only be rolled back to a recorded point; the
// MLA caches are simply truncated), and the model's T-position pass equals
// T one-position passes bit for bit (k3-model.md §7.9).
//
// Each entry keeps the tokens its session has consumed, the session itself
// and snapshots at chosen lengths ("boundaries"): the prompt minus its last
// token (so the same prompt again reuses all but one position) and the end of
// the generation (so a chat that continues the conversation reuses it).
// Entries are LRU and bounded by count and by bytes.
#pragma once

#include <cstdint>
#include <list>
#include <vector>

#include "model/kimi_k3/session.h"

namespace deltafin {

class PromptCache {
public:
  PromptCache(size_t max_entries, uint64_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // The longest usable reuse for `prompt`: restores `session` (which must be
  // fresh) to the state after prompt[0, r) and returns r; 0 when nothing
  // matches. r < prompt.size(), so at least one position is always run and
  // yields the logits of the last prompt token.
  int64_t restore(const std::vector<uint32_t>& prompt, K3Session& session);

  // Keeps `session` (which consumed `tokens`) with snapshots at `boundaries`
  // (lengths <= tokens.size(); each snapshot taken when the session had that
  // length). Entries whose tokens are a prefix of `tokens` are merged into
  // it (their snapshots carried over): the new one covers them.
  void put(std::vector<uint32_t> tokens, K3Session session, std::vector<K3Session::Snapshot> boundaries);

  size_t entries() const { return entries_.size(); }
  uint64_t bytes() const { return bytes_; }

private:
  struct Entry {
    std::vector<uint32_t> tokens;
    K3Session session;
    std::vector<K3Session::Snapshot> boundaries;  // ascending length
    uint64_t bytes = 0;
  };
  static uint64_t entry_bytes(const Entry& e);
  void evict_to_fit();

  size_t max_entries_;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace deltafin
