// Response objects shaped like OpenAI's (chat.completion, chat.completion.chunk,
// text_completion, list of models) and the server-sent-event framing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deltafin::api {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;     // prompt tokens whose state came from prompt reuse
  int64_t reasoning_tokens = 0;  // chat: completion tokens spent in the think block
};
nlohmann::json usage_json(const Usage& u);

// What every object of one response shares.
struct ResponseHead {
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// One tool call of an answer, as the model wrote it.
struct ToolCallOut {
  std::string id;         // "call_..." (the server's; unique per server run)
  std::string name;
  std::string arguments;  // the JSON object's text as generated (it may not parse: see chat_output.h)
};

// finish_reason: "stop" (end of message or a stop string), "length"
// (max_tokens or the context is full) or "tool_calls" (the turn ended with
// calls). content is null when empty and there are tool calls, as OpenAI
// sends it.
nlohmann::json chat_completion(const ResponseHead& h, const std::string& reasoning, const std::string& content,
                               const std::vector<ToolCallOut>& tool_calls, const std::string& finish_reason,
                               const Usage& usage);
// The id of call #index (from 0) of response `h`.
std::string tool_call_id(const ResponseHead& h, size_t index);
// A streamed piece of call #index: the first ({"index", "id", "type",
// "function": {"name", "arguments": ""}}) when `name` is set, else
// {"index", "function": {"arguments"}}.
nlohmann::json tool_call_chunk_delta(const ResponseHead& h, size_t index, const std::string* name,
                                     const std::string& arguments);
// One streamed chunk: delta is {"role"}, {"reasoning_content"}, {"content"}
// or {"tool_calls"}; finish_reason null until the last choice chunk.
nlohmann::json chat_chunk(const ResponseHead& h, const nlohmann::json& delta,
                          const std::optional<std::string>& finish_reason);
nlohmann::json text_completion(const ResponseHead& h, const std::string& text, const std::string& finish_reason,
                               const Usage& usage);
nlohmann::json text_chunk(const ResponseHead& h, const std::string& text,
                          const std::optional<std::string>& finish_reason);
// The final chunk of stream_options.include_usage: no choices, only usage.
nlohmann::json usage_chunk(const ResponseHead& h, bool chat, const Usage& usage);
nlohmann::json models_list(const std::vector<std::string>& ids, int64_t created);

// "data: <json>\n\n" (the JSON dumped on one line) and the final "data: [DONE]\n\n".
std::string sse_event(const nlohmann::json& j);
std::string sse_done();

}  // namespace deltafin::api
