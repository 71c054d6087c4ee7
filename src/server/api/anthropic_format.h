// Response objects and events shaped like Anthropic's Messages API: the
// message, its content blocks built from the answer as it is generated, the
// server-sent events of a streamed message, and errors.
//
// Content blocks follow the answer's order: a thinking block for the
// reasoning channel, text blocks for the answer, a tool_use block per tool
// call. A tool call is held until it is complete (its closing markup, or the
// end of generation), because a tool_use block's input must be a JSON
// object: a call whose arguments are one becomes a tool_use block (streamed
// as one input_json_delta carrying the arguments as the model wrote them);
// any other call is never dropped but shown as a text block
// "[tool call NAME: ARGUMENTS]" (docs/agents.md).
// Thinking blocks carry an empty signature: deltafin signs nothing, and
// accepts any signature back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/common/chat_format.h"
#include "server/api/api_error.h"

namespace deltafin::api {

// {"type": "error", "error": {"type", "message"}}, the type from the status
// (400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 503 overloaded_error, other 5xx api_error).
nlohmann::ordered_json anthropic_error(const ApiError& e);

struct MessageUsage {
  int64_t prompt_tokens = 0;     // the whole prompt
  int64_t cached_tokens = 0;     // of them, restored from kept prompt states
  int64_t output_tokens = 0;
  int64_t thinking_tokens = 0;
};
// {"input_tokens" (the prompt less what was reused), "output_tokens",
// "cache_creation_input_tokens": 0, "cache_read_input_tokens",
// "output_tokens_details": {"thinking_tokens"}}.
nlohmann::ordered_json message_usage(const MessageUsage& u);

// "event: NAME\ndata: <json>\n\n", the JSON on one line.
std::string anthropic_event(const std::string& name, const nlohmann::ordered_json& data);
std::string anthropic_ping();

// The content blocks of one answer, fed the answer's pieces as they are
// generated; push() and finish() return the events that stream them
// (content_block_start, _delta, _stop), which a whole answer ignores.
class MessageBlocks {
public:
  // message_id: "msg_<tail>"; tool_use ids are "toolu_<tail>_<k>".
  MessageBlocks(std::string message_id, bool show_thinking);

  std::string push(const ChatDelta& d);
  // End of the answer: a call still held and the open block are closed.
  std::string finish();

  const nlohmann::ordered_json& content() const { return content_; }
  size_t tool_uses() const { return tool_uses_; }

private:
  std::string open(const char* type);  // closes the open block, starts one of `type`
  std::string close();
  std::string complete_call();

  std::string tail_;
  bool show_thinking_;
  nlohmann::ordered_json content_ = nlohmann::ordered_json::array();
  std::optional<std::string> open_;  // the type of the block being streamed
  size_t tool_uses_ = 0;
  bool call_held_ = false;
  std::string call_name_, call_arguments_;
};

// The whole message: {"id", "type": "message", "role": "assistant", "model",
// "content", "stop_reason", "stop_sequence", "usage"}.
nlohmann::ordered_json message_json(const std::string& id, const std::string& model, const nlohmann::ordered_json& content,
                            const std::string& stop_reason, const std::optional<std::string>& stop_sequence,
                            const MessageUsage& usage);
// message_start's message: no content, no stop reason yet, the prompt's size.
nlohmann::ordered_json message_start_json(const std::string& id, const std::string& model, int64_t prompt_tokens);

}  // namespace deltafin::api
