// Incremental decoding for generation: token ids arrive one at a time and
// the caller wants text as soon as it is complete. A multi-byte UTF-8
// character can be split across tokens, so the bytes of an unfinished
// character are held back until the next token completes it (k3-model.md
// §8.3). What all push() calls plus flush() return equals
// the tokenizer's decode of the whole id sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace deltafin {

class TokenText;
class Tokenizer;

class StreamDecoder {
public:
  // The tokenizer must outlive the decoder.
  explicit StreamDecoder(const TokenText& tokenizer) : tokenizer_(&tokenizer) {}
  // A K3 tokenizer (the decoder keeps its own view of it).
  explicit StreamDecoder(const Tokenizer& tokenizer);

  // Adds one token; returns the text that is now complete (possibly empty).
  // Invalid bytes that no later token can repair come out as U+FFFD at once.
  std::string push(uint32_t id);

  // End of stream: returns what is held back, a dangling fragment becoming
  // U+FFFD, and resets the decoder.
  std::string flush();

  // Bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

private:
  std::shared_ptr<const TokenText> own_;  // set by the Tokenizer constructor
  const TokenText* tokenizer_;
  std::string pending_;
};

}  // namespace deltafin
