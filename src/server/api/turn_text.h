// What one generation shows, token by token: the chat channels (reasoning,
// content, split by the family's ChatOutput) or the raw completion text,
// with the request's stop strings applied. Stop strings apply to the answer
// the client reads: the content of a chat turn (not its reasoning) or the
// completion text; the stop string itself is never returned.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/common/chat_format.h"
#include "server/api/stop_matcher.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/token_text.h"

namespace deltafin::api {

using OutputDelta = ChatDelta;

class TurnText {
public:
  // A chat turn: `chat` splits its tokens into channels and tool calls.
  // one_tool_call (parallel_tool_calls: false): the turn ends once its first
  // tool call is complete, as a stop string would end it.
  TurnText(std::unique_ptr<ChatOutput> chat, std::vector<std::string> stops, bool one_tool_call = false);
  // A raw completion: the tokens' bytes as text.
  TurnText(const TokenText& text, std::vector<std::string> stops);

  // Text to show after this token (either part may be empty).
  OutputDelta push(uint32_t id);
  // End of generation (not after a stop): whatever was held back.
  OutputDelta finish();
  // A stop string has completed, or the one tool call allowed has:
  // generation should end now.
  bool stopped() const { return stop_.stopped() || call_done_; }
  bool stopped_by_string() const { return stop_.stopped(); }
  const std::string& stop_string() const { return stop_.matched(); }  // which one, when stopped_by_string()
  int64_t reasoning_tokens() const { return chat_ ? chat_->reasoning_tokens() : 0; }

private:
  OutputDelta filter(OutputDelta d);

  std::unique_ptr<ChatOutput> chat_;
  std::optional<StreamDecoder> raw_;
  StopMatcher stop_;
  bool one_tool_call_ = false, call_done_ = false;
};

}  // namespace deltafin::api
