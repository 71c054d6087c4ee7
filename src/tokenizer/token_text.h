// Text <-> token ids as the generation loop and the CLI need it, whatever
// the family's tokenizer: K3's tiktoken-style Tokenizer or a Hugging Face
// tokenizer.json (HfTokenizer, Qwen3). Only ordinary text is encoded here
// (special spellings stay text, as for raw prompts); chat rendering belongs
// to each family's template.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deltafin {

class Tokenizer;
class HfTokenizer;

class TokenText {
public:
  virtual ~TokenText() = default;
  // Text -> ids with no special tokens (`text` must be valid UTF-8).
  virtual std::vector<uint32_t> encode_ordinary(std::string_view text) const = 0;
  // The raw bytes of one token (possibly part of a UTF-8 character); empty
  // for an id past the tokenizer inside the model's vocabulary (padding rows).
  virtual std::string token_bytes(uint32_t id) const = 0;
  virtual uint32_t vocab_size() const = 0;
};

// Views of the two tokenizers; the tokenizer must outlive the view.
std::unique_ptr<TokenText> token_text(const Tokenizer& tokenizer);
std::unique_ptr<TokenText> token_text(const HfTokenizer& tokenizer);

}  // namespace deltafin
