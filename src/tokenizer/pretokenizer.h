// The pre-tokenizer: splits text into the pieces BPE runs on, with a regex
// matched leftmost-first from left to right (what tiktoken does with
// fancy-regex's find_iter). Patterns are written in Rust regex syntax, as
// tiktoken and Kimi publish them, and translated for PCRE2 (regex_translate.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex_translate.h"

namespace deltafin {

// The K3 pre-tokenizer pattern exactly as k3-model.md §8.2 writes it (the
// eight alternatives joined by '|', with Rust's `&&` class intersections).
extern const char* const kK3Pattern;

class Pretokenizer {
public:
  // Translates `pattern` (Rust syntax) and compiles it with PCRE2 (UTF, UCP,
  // JIT when available). Throws deltafin::Error naming the pattern and
  // offset if it cannot be translated or compiled.
  explicit Pretokenizer(std::string pattern);

  // The pattern as given (Rust syntax) and as compiled (PCRE2 syntax).
  const std::string& pattern() const { return pattern_; }
  const std::string& pcre2_pattern() const;

  // The pieces of `text`, in order. Text between matches (none for the
  // tiktoken patterns, which match every character) is dropped, as tiktoken
  // drops it. `text` must be valid UTF-8 (else an Error naming the offset).
  // Thread-safe.
  std::vector<std::string_view> split(std::string_view text) const;

  // Like split, but text between matches is kept as pieces of its own: the
  // Hugging Face Split pre-tokenizer with behavior "Isolated". The pieces
  // concatenate back to `text`.
  std::vector<std::string_view> split_isolated(std::string_view text) const;

private:
  std::vector<std::string_view> scan(std::string_view text, bool keep_gaps) const;
  struct Compiled;
  std::string pattern_;
  std::shared_ptr<const Compiled> compiled_;  // immutable, so copies share it
};

}  // namespace deltafin
