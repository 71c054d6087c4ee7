// Turning generated token ids into what an API response shows.
//
// ChatOutputParser: a K3 assistant turn is XTML (k3-model.md §9.5):
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
// StopMatcher: OpenAI `stop` strings. Text is held back while it could still
// be the start of a stop string; when one completes, the text before it is
// released, the stop string and everything after it are dropped, and
// stopped() turns true.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace deltafin::api {

struct OutputDelta {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ChatOutputParser {
public:
  // thinking: the prompt ended with open(think), so generation starts in the
  // reasoning channel; otherwise it ended with open(response) (content).
  ChatOutputParser(const Tokenizer& tokenizer, bool thinking);

  // One generated token (never <|end_of_msg|>: the caller stops before it).
  OutputDelta push(uint32_t id);
  // End of generation: held-back bytes (a dangling UTF-8 fragment becomes
  // U+FFFD, an unfinished tag is shown as its text).
  OutputDelta flush();

  // Tokens generated while in the reasoning channel (usage.reasoning_tokens).
  int64_t reasoning_tokens() const { return reasoning_tokens_; }

private:
  enum class Channel { Reasoning, Content };
  void emit(uint32_t id, OutputDelta& out);
  void finish_tag(OutputDelta& out);

  const Tokenizer* tok_;
  Channel channel_;
  StreamDecoder reasoning_, content_;
  std::vector<uint32_t> tag_;  // an open/close token and what followed it, until <|sep|>
  uint32_t open_id_, close_id_, sep_id_;
  int64_t reasoning_tokens_ = 0;
};

class StopMatcher {
public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds text; returns the text that can be shown now.
  std::string push(std::string_view text);
  // End of generation without a stop: the held-back text.
  std::string flush();
  bool stopped() const { return stopped_; }

private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace deltafin::api
