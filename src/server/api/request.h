// Parsing and validation of /v1/chat/completions and /v1/completions request
// bodies. Pure functions of the body text and the server's limits (no model,
// no I/O), so they are unit-tested exhaustively (tests/server/request_test.cpp)
// and fuzzed (fuzz/request_fuzz.cpp, scripts/fuzz.sh).
//
// Policy (`deltafin serve --help`, docs/cli.md): every field is checked for type and range; a field
// that is not in the accepted list, or a feature deltafin does not honour,
// is a 400 naming the field. JSON null counts as "not given" for optional
// fields, as in OpenAI's API (top-level fields, stream_options.include_usage,
// and the optional keys of messages, content parts and tool calls); a field
// outside the accepted list is refused even when null. Decoding is greedy (the
// target model decides every token), so `temperature` must be 0 or absent
// (anything else would be a promise to sample that deltafin does not keep:
// 400), while `top_p` in (0, 1] is accepted because the argmax is always
// inside the nucleus.
//
// Accepted fields. Both endpoints: model (required; 404 when not served),
// max_tokens / max_completion_tokens (integer 1..ceiling; both given must be
// equal), stop (string or 1..4 strings, none empty), stream, stream_options
// ({include_usage}, only with stream: true), temperature (0), top_p (0, 1],
// seed (int64), n (1), user, logprobs (false; on completions an integer count
// is refused as unsupported too), and at their neutral values only
// frequency_penalty and presence_penalty (0), logit_bias ({} or biases of 0).
// Chat: messages (required), reasoning_effort ("minimal", "low", "medium",
// "high", "max"; the family's chat format maps it), tools (1..128 of
// {"type": "function", "function": {name (1..64 of [A-Za-z0-9_-], unique),
// description?, parameters? (an object), strict? (boolean)}}), tool_choice
// ("none", "auto", "required" or {"type": "function", "function": {"name"}}
// naming a declared tool; "required" and a name need tools), parallel_tool_calls
// (boolean; false ends the turn after its first call), response_format
// ({"type": "text"}, {"type": "json_object"} or {"type": "json_schema",
// "json_schema": {name, description?, schema? (an object), strict?}}: the
// family's template asks for the format; nothing constrains the output),
// store (false), metadata (up to 16 string values: bookkeeping, ignored),
// top_logprobs (0), service_tier ("auto", "default"), modalities (["text"]).
// A family whose template cannot express one of these refuses it when the
// prompt is prepared (400 naming the field). Completions: prompt (required: a non-empty string, or a
// non-empty array of token ids < vocab_size; batches are refused), echo
// (false), suffix (must be absent), best_of (1).
//
// Messages: objects with role system/developer/user/assistant/tool (developer
// is OpenAI's successor of system and is rendered as one) and only these keys:
// role, content, name (string); assistant also tool_calls (array of {id?,
// type? = "function", function: {name: non-empty string, arguments: object or
// string}}; an arguments string that is JSON must hold an object),
// reasoning_content, reasoning (strings); tool also tool_call_id, tool
// (strings). content is a string or an array of {"type": "text", "text"}
// parts (other part types: unsupported); it may be null or missing only on an
// assistant message with at least one tool call. A tool message must resolve
// to a tool name the way render_chat does (a tool_call_id run matching the
// preceding assistant's call ids, a non-empty `tool`/`name`, or a call at its
// position), so every accepted chat request renders.
//
// Limits beyond the fields: arrays/objects nest at most 64 levels (in the body
// and in a tool-call arguments string), because copies, comparisons and the
// renderer's JSON writer recurse. Strings are valid UTF-8 (nlohmann's parser
// refuses anything else), and messages quote values back clipped and as valid
// UTF-8, so ApiError::body() always serialises.
//
// Errors (ApiError): status 400 with type "invalid_request_error", param the
// field path ("messages[2].content[0].type", "" for the body as a whole) and
// code one of invalid_json, invalid_type, invalid_value,
// missing_required_parameter, unknown_field, unsupported_value; 404
// "not_found_error" / model_not_found for a model the server does not serve.
// Checks run in a fixed order (unknown fields, model, messages or prompt, the
// rest), so the first problem found is the one reported.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api/api_error.h"

namespace deltafin::api {

enum class Endpoint { Chat, Completion };

struct RequestLimits {
  std::vector<std::string> model_ids;  // the names the server answers to (404 otherwise)
  int64_t max_tokens_ceiling = 0;      // --max-tokens: a larger max_tokens is a 400
  uint32_t vocab_size = 0;             // token-id prompts must be below this
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Chat;
  std::string model;

  // Chat: the messages exactly as given (validated), for render_chat().
  nlohmann::ordered_json messages;
  std::optional<std::string> reasoning_effort;  // OpenAI's level as given; unset: the family's default
  // The answer starts with a reasoning block. Always on the OpenAI routes;
  // the Anthropic route's `thinking` turns it off (its default).
  bool thinking = true;
  // tools, tool_choice and response_format as given (validated; null when
  // absent; a {"type": "text"} format is null), for the family's template.
  nlohmann::ordered_json tools, tool_choice, response_format;
  bool parallel_tool_calls = true;

  // Completion: text (encoded without special tokens) or token ids.
  std::optional<std::string> prompt_text;
  std::vector<uint32_t> prompt_ids;

  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens, >= 1, <= ceiling
  std::vector<std::string> stop;      // 0..4 non-empty strings
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  std::optional<int64_t> seed;        // accepted; greedy decoding does not use it
  std::string user;
};

// Throws ApiError (400 naming the field; 404 for an unknown model).
GenerationRequest parse_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits);
// The same for a body already parsed (a JSON object): the Anthropic route
// validates its own request, translates it into this form and checks that.
GenerationRequest parse_request_json(Endpoint endpoint, nlohmann::ordered_json body, const RequestLimits& limits);
// The body's "model" when this server serves it; 400 when absent or not a
// string, 404 (model_not_found) when it names another model.
std::string served_model(const nlohmann::ordered_json& body, const RequestLimits& limits);

}  // namespace deltafin::api
