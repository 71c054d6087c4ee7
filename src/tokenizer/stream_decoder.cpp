#include "tokenizer/stream_decoder.h"

#include "tokenizer/token_text.h"
#include "tokenizer/utf8.h"

namespace deltafin {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer) : own_(token_text(tokenizer)), tokenizer_(own_.get()) {}

std::string StreamDecoder::push(uint32_t id) {
  pending_ += tokenizer_->token_bytes(id);
  // Everything but a trailing valid-so-far fragment is final: the decoder
  // replaces maximal subparts, so bytes before the fragment decode the same
  // whatever follows.
  size_t keep = utf8_incomplete_tail(pending_);
  std::string out = utf8_replace_invalid(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8_replace_invalid(pending_);
  pending_.clear();
  return out;
}

}  // namespace deltafin
