// K3ChatOutput (model/common/chat_format.h's ChatOutput for K3): a K3 assistant turn is XTML (k3-model.md §9.5):
//   reasoning <|close|>think<|sep|> <|open|>response<|sep|> answer
//   <|close|>response<|sep|> <|close|>message<|sep|> <|end_of_msg|>
// The parser works on token ids, not on text, so an answer that merely
// spells "<|close|>" in ordinary tokens stays answer text. Structural tags
// (open/close of think and response, close of message) switch channels and
// are not shown; any other tag, or any other special token, is shown in the
// current channel as its spelling, so nothing the model wrote is dropped.
// Text outside both blocks (between them, after close(message)) goes to
// content. Each channel decodes UTF-8 incrementally (StreamDecoder).
//
// Tags: <|open|> or <|close|> starts one; it and the tokens after it are
// held back until <|sep|>, and the decoded tokens between are the tag name.
// Structural (hidden): open(think) -> reasoning; open(response),
// close(think), close(response), close(message) -> content, whatever the
// current channel. Anything else is shown verbatim (the spelling of every
// held token, through the current channel's decoder): an unknown name such
// as open(tools) or one with attributes, a held run that meets another
// special token (shown at once, with it), a held run of more than 64 tokens
// without <|sep|>, or one cut by a new <|open|>/<|close|> (which then starts
// the next tag). Outside a tag, a stray <|sep|> or any other special token
// is shown as its spelling. So for ids without structural tags, the text a
// channel receives equals Tokenizer::decode of the ids it consumed.
// Switching channels flushes the old channel's decoder, so a UTF-8 fragment
// left dangling there becomes U+FFFD. A delta never has text in both
// channels (a switch releases only the old channel's bytes), so the order of
// the two fields does not matter.
// reasoning_tokens counts each token consumed while the channel is
// reasoning, before any switch it causes: the three tokens of close(think)
// count, the tokens of open(think) written from content do not.
//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/common/chat_format.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

class K3ChatOutput final : public ChatOutput {
public:
  // thinking: the prompt ended with open(think), so generation starts in the
  // reasoning channel; otherwise it ended with open(response) (content).
  K3ChatOutput(const Tokenizer& tokenizer, bool thinking);

  ChatDelta push(uint32_t id) override;
  // End of generation: held-back bytes (a dangling UTF-8 fragment becomes
  // U+FFFD, an unfinished tag is shown as its text).
  ChatDelta flush() override;
  int64_t reasoning_tokens() const override { return reasoning_tokens_; }

private:
  enum class Channel { Reasoning, Content };
  void emit(uint32_t id, ChatDelta& out);
  void finish_tag(ChatDelta& out);
  void show_tag(ChatDelta& out);  // the held tag tokens as text, in the current channel
  void switch_to(Channel channel, ChatDelta& out);

  const Tokenizer* tok_;
  Channel channel_;
  StreamDecoder reasoning_, content_;
  std::vector<uint32_t> tag_;  // an open/close token and what followed it, until <|sep|>
  uint32_t open_id_, close_id_, sep_id_;
  int64_t reasoning_tokens_ = 0;
};

}  // namespace deltafin
