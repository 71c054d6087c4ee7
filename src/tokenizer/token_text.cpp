#include "tokenizer/token_text.h"

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

namespace {

class TiktokenText : public TokenText {
public:
  explicit TiktokenText(const Tokenizer& t) : t_(t) {}
  std::vector<uint32_t> encode_ordinary(std::string_view text) const override { return t_.encode_ordinary(text); }
  std::string token_bytes(uint32_t id) const override { return t_.token_bytes(id); }
  uint32_t vocab_size() const override { return t_.vocab_size(); }

private:
  const Tokenizer& t_;
};

class HfText : public TokenText {
public:
  explicit HfText(const HfTokenizer& t) : t_(t) {}
  std::vector<uint32_t> encode_ordinary(std::string_view text) const override { return t_.encode(text, false); }
  // An id past the tokenizer (Qwen checkpoints pad vocab_size beyond it: the
  // model can emit such a row) has no text: it decodes to nothing, as in
  // Hugging Face's decode.
  std::string token_bytes(uint32_t id) const override {
    if (id >= t_.vocab_size()) return {};
    return t_.decode(std::span<const uint32_t>(&id, 1));
  }
  uint32_t vocab_size() const override { return static_cast<uint32_t>(t_.vocab_size()); }

private:
  const HfTokenizer& t_;
};

}  // namespace

std::unique_ptr<TokenText> token_text(const Tokenizer& t) { return std::make_unique<TiktokenText>(t); }
std::unique_ptr<TokenText> token_text(const HfTokenizer& t) { return std::make_unique<HfText>(t); }

}  // namespace deltafin
