// K3's chat format (k3-model.md §9): the XTML renderer of
// model/kimi_k3/chat/chat_template.h, encoded segment by segment (user text never
// becomes a special token), and K3ChatOutput for the answer.
#pragma once

#include "model/common/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

class K3ChatFormat final : public ChatFormat {
public:
  explicit K3ChatFormat(const Tokenizer& tokenizer) : tok_(tokenizer) {}
  RenderedChat render(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const override;
  std::unique_ptr<ChatOutput> output(bool thinking) const override;
  std::vector<uint32_t> end_tokens() const override { return {tok_.eos_id()}; }  // <|end_of_msg|>

private:
  const Tokenizer& tok_;
};

// K3's tiktoken.model with its chat format (FamilyTokenizer).
class K3FamilyTokenizer final : public FamilyTokenizer {
public:
  explicit K3FamilyTokenizer(const std::string& dir);  // reads tiktoken.model and tokenizer_config.json
  std::vector<uint32_t> encode(const std::string& text, bool specials) const override;
  const ChatFormat* chat() const override { return &chat_; }
  std::string render_text(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const override;

private:
  Tokenizer tok_;
  K3ChatFormat chat_{tok_};
};

}  // namespace deltafin
