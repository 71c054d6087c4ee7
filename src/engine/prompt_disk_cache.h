// Prompt states kept on disk, so a restarted `run` or `serve` continues a
// prompt that shares a long prefix with an earlier one (a 10k-token system
// prompt, a document) instead of prefilling it again.
//
// Keys: the prompt is cut into blocks of kBlock tokens, and block k's key is
// a hash chain h_k = SHA-256(h_{k-1} ‖ the block's tokens), h_0 = SHA-256 of
// the model fingerprint and the format version. A state is kept only at a
// whole-block length L, in "<hex h_{L/B}>.state"; so any later prompt that
// shares L tokens of prefix finds it by its own chain, whatever follows, and
// states of another model or format can never be looked up by mistake.
//
// A file is: a header (magic, format version, the fingerprint, L, the
// payload's size and CRC-32C, the header's own CRC-32C), the L tokens (checked
// against the prompt, so even a hash collision cannot restore a wrong
// state), and the session state in its family's order (CausalModel::
// for_each_state_part: K3's in model/kimi_k3/session_file.h). It is written
// under a temporary name, fsynced and renamed (util/file.h AtomicFile): a
// crash leaves either no file or a whole one; stale temporaries are removed
// when the cache is opened. A file that is truncated, corrupt (any CRC), of
// another model, format or length, or whose tokens differ is ignored with a
// warning on stderr and removed: never used.
//
// Disk budget: after each write, the least recently used files are removed
// until the directory holds at most `budget_bytes`; a state larger than the
// whole budget is not written. One process at a time per directory (like a
// streamed store), so "recently" has two parts: the files this cache has
// written or used since it was opened, in the exact order of those uses
// (counted, not read back from mtimes: an mtime has the file system's
// granularity, a clock tick or a whole second, and follows the wall clock,
// which can step back); and before them, oldest first, the files only an
// earlier process used, by mtime (refreshed on every hit, for the next
// process).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <memory>

#include "model/common/causal_model.h"

namespace deltafin {

class PromptDiskCache {
public:
  static constexpr int64_t kBlock = 256;
  static constexpr uint32_t kFormatVersion = 1;

  // Opens (creates) `dir`. `fingerprint`: what identifies the model's
  // weights and numerics (engine: LoadedModel::fingerprint; it names the
  // family's config, so states of one family never reach another). Keeps a
  // reference to `model`. Throws deltafin::Error when the directory cannot
  // be made.
  PromptDiskCache(std::string dir, uint64_t budget_bytes, std::string fingerprint, const CausalModel& model);

  // The longest kept length L with more_than < L < prompt.size() (at least
  // one token is always left to run); 0 when none. Looks at names only.
  // `scope` (GenerateRequest::cache_scope) is part of every name: a state
  // is found only by a request of the scope that kept it ("" = shared).
  int64_t available(std::span<const uint32_t> prompt, int64_t more_than, const std::string& scope = "") const;
  // A new session holding the state after prompt[0, L) for the longest
  // valid kept L (as available()), trying shorter ones when a file proves
  // bad; no session and L = 0 when none is usable.
  struct Restored {
    std::unique_ptr<ModelSession> session;
    int64_t length = 0;
  };
  Restored restore(std::span<const uint32_t> prompt, int64_t more_than, const std::string& scope = "");

  // Where a prompt of n tokens is worth keeping: the largest whole-block
  // length below n (0 when the prompt is shorter than a block).
  static int64_t save_point(int64_t prompt_tokens);
  // Keeps the state after tokens[0, L), L = at.length (a whole number of
  // blocks): `at` is a mark of `session` taken at that length (the session
  // may have grown since). Does nothing when that state is already kept (it
  // is marked used). Errors are warned about, not thrown: a cache that
  // cannot write costs only the reuse.
  void save(std::span<const uint32_t> tokens, const SessionMark& at, const ModelSession& session,
            const std::string& scope = "");

  struct Stats {
    int64_t hits = 0, writes = 0, rejected = 0, evicted = 0;
    uint64_t bytes = 0;  // of the kept files, after the last write or eviction
  };
  Stats stats() const { return stats_; }
  const std::string& dir() const { return dir_; }

private:
  std::string path_for(std::span<const uint32_t> tokens, int64_t blocks, const std::string& scope) const;
  std::vector<std::string> chain(std::span<const uint32_t> tokens, int64_t blocks, const std::string& scope) const;
  bool load(const std::string& path, std::span<const uint32_t> prompt, int64_t length, ModelSession& session);
  void reject(const std::string& path, const std::string& why);
  void enforce_budget(const std::string& keep);
  // Records a use of `path` (a write, a hit, a save of a kept state): its
  // place in this process's order of use, and its mtime for the next process.
  void mark_used(const std::string& path);
  void forget(const std::string& path);

  std::string dir_;
  uint64_t budget_;
  std::string fingerprint_;
  const CausalModel& model_;
  Stats stats_;
  uint64_t uses_ = 0;                                     // uses so far: the clock of last_use_
  std::unordered_map<std::string, uint64_t> last_use_;    // file name -> its latest use since opening
};

}  // namespace deltafin
