// Prompt reuse in RAM: session states kept after requests, so a later
// request whose tokens start with the same prefix continues from the kept
// state instead of recomputing it. The output is the same as a cold run by
// construction: a state is only reused at a length where it was marked
// exactly (a recurrent state such as K3's KDA can only be rolled back to a
// recorded point; attention caches are simply cut), and every family's
// T-position pass equals T one-position passes bit for bit (design.md §5).
//
// Each entry keeps the tokens its session has consumed, the session itself
// and marks at chosen lengths ("boundaries"): the prompt minus its last
// token (so the same prompt again reuses all but one position) and the end
// of the generation (so a chat that continues the conversation reuses it).
// Entries are LRU and bounded by count and by bytes (the session's bytes,
// the tokens and what each mark holds beside the session).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/common/causal_model.h"

namespace deltafin {

class PromptCache {
public:
  // Keeps a reference to `model`, whose sessions and marks it holds.
  PromptCache(const CausalModel& model, size_t max_entries, uint64_t max_bytes)
      : model_(model), max_entries_(max_entries), max_bytes_(max_bytes) {}

  // The longest usable reuse for `prompt`: a new session holding the state
  // after prompt[0, r), r < prompt.size() (so at least one position is
  // always run and yields the logits of the last prompt token); no session
  // and r = 0 when nothing matches. The entry stays usable.
  struct Restored {
    std::unique_ptr<ModelSession> session;
    int64_t length = 0;
  };
  // Only entries kept under the same `scope` are used (GenerateRequest::cache_scope).
  Restored restore(const std::vector<uint32_t>& prompt, const std::string& scope = "");
  // The length restore() would give now, without copying a state or
  // touching the LRU order: what the server's admission by time counts as
  // not to be prefilled.
  int64_t reusable(const std::vector<uint32_t>& prompt, const std::string& scope = "") const;

  // Keeps `session` (which consumed `tokens`) with marks at `boundaries`
  // (each taken when the session had that length <= tokens.size()).
  // Entries whose tokens are a prefix of `tokens` are merged into it (their
  // marks carried over): the new one covers them.
  void put(std::vector<uint32_t> tokens, std::unique_ptr<ModelSession> session,
           std::vector<std::shared_ptr<SessionMark>> boundaries, const std::string& scope = "");

  size_t entries() const { return entries_.size(); }
  uint64_t bytes() const { return bytes_; }

private:
  struct Entry {
    std::string scope;
    std::vector<uint32_t> tokens;
    std::unique_ptr<ModelSession> session;
    std::vector<std::shared_ptr<SessionMark>> boundaries;  // ascending length
    uint64_t bytes = 0;
  };
  static uint64_t entry_bytes(const Entry& e);
  // The entry and mark restore() takes for `prompt` (end() and nullptr when none).
  std::pair<std::list<Entry>::const_iterator, const SessionMark*> best(const std::vector<uint32_t>& prompt,
                                                                       const std::string& scope) const;
  void evict_to_fit();

  const CausalModel& model_;
  size_t max_entries_;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace deltafin
