// Parsing and validation of Anthropic Messages API bodies (POST /v1/messages
// and /v1/messages/count_tokens), translated into the chat request the
// OpenAI route builds (request.h), so that one renderer, one engine call and
// one answer parser serve both APIs. Pure functions of the body text and the
// server's limits, unit-tested (tests/server/anthropic_request_test.cpp) and
// fuzzed with the OpenAI bodies (fuzz/request_fuzz.cpp).
//
// Accepted fields (anything else is a 400 naming it):
//   model (required; 404 when not served), max_tokens (required on
//   /v1/messages: 1..the server's --max-tokens), messages (required),
//   system (a string or text blocks), stop_sequences (0..16 non-empty
//   strings), stream, tools, tool_choice, thinking, output_config ({effort,
//   format}), metadata ({user_id}), service_tier ("auto", "standard_only"),
//   speed ("standard" or null), cache_control, context_management ({edits:
//   [clear_thinking_20251015 with keep "all" or N thinking turns]}: older
//   turns' thinking left out; other edits refused); and, as on the OpenAI route,
//   temperature (0 only: decoding is greedy), top_p in (0, 1] and top_k >= 1
//   (the argmax is always inside the nucleus and the top k). count_tokens
//   takes model, messages, system, tools, tool_choice, thinking,
//   output_config, cache_control and context_management.
//
// Messages have the roles "user", "assistant" and "system" (a system message
// inside the conversation, as Claude Code sends them, rendered at its
// place); content is a string or an array of blocks:
//   user:      text, tool_result {tool_use_id, content (string or text
//              blocks), is_error} (tool results first, each answering a
//              tool_use of the assistant message just before it);
//   assistant: text, thinking {thinking, signature} (the signature is not
//              checked: deltafin signs nothing), tool_use {id, name, input
//              (an object)}; redacted_thinking is refused (deltafin cannot
//              read it back), and so is a final assistant message (a
//              prefilled answer the template cannot continue).
// Text blocks may carry cache_control ({"type": "ephemeral", ttl "5m" |
// "1h"}): accepted, because deltafin already reuses every prompt prefix it
// has computed (RAM and disk), so the marker asks for nothing more. Image,
// document and other block types are refused (no vision tower runs).
//
// How it maps onto the chat request (docs/anthropic-api.md has the table):
// system -> a system message of text parts; tool_result -> a tool message
// (is_error: its text prefixed "Error: "); tool_use -> an assistant tool
// call; thinking blocks -> reasoning_content; tools {name, description,
// input_schema} -> function tools; tool_choice auto/any/tool/none -> auto/
// required/named/none, disable_parallel_tool_use -> parallel_tool_calls:
// false; thinking absent or disabled -> no reasoning block; enabled
// (budget_tokens >= 1024 and < max_tokens) -> a reasoning block at the level
// its budget names (< 4,000 low, < 16,000 medium, < 32,000 high, else max);
// adaptive -> a reasoning block at the family's default level;
// output_config.effort (low, medium, high, xhigh -> high, max) sets the level
// and wins over a budget; output_config.format {type: json_schema, schema}
// -> response_format json_schema named "output". The budget is a level, not
// a cut: the target model decides when its reasoning ends.
#pragma once

#include <string_view>

#include "server/api/request.h"

namespace deltafin::api {

struct MessagesRequest {
  GenerationRequest chat;     // the translated request (Endpoint::Chat)
  bool show_thinking = true;  // false for thinking.display "omitted": thinking blocks come back empty
};

// Throws ApiError (400 naming the field by its Anthropic path; 404 for an
// unknown model). count_tokens: the /v1/messages/count_tokens body.
MessagesRequest parse_messages_request(std::string_view body, const RequestLimits& limits, bool count_tokens);

}  // namespace deltafin::api
