#include "server/api/openai_format.h"

#include <algorithm>

#include "util/error.h"

namespace deltafin::api {

using nlohmann::json;

namespace {

json finish(const std::optional<std::string>& r) { return r ? json(*r) : json(nullptr); }

// dump() with invalid UTF-8 replaced rather than throwing: generated text is
// already repaired by the decoder, but a response must never fail to encode.
std::string dump_line(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}}};
}

json chat_completion(const ResponseHead& h, const std::string& reasoning, const std::string& content,
                     const std::vector<ToolCallOut>& tool_calls, const std::string& finish_reason, const Usage& usage) {
  // refusal: null, as OpenAI sends it (the SDKs type it string | null): the model never refuses out of band.
  json message = {{"role", "assistant"},
                  {"content", content.empty() && !tool_calls.empty() ? json(nullptr) : json(content)},
                  {"refusal", nullptr}};
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  if (!tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCallOut& c : tool_calls)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    message["tool_calls"] = calls;
  }
  return {{"id", h.id},
          {"object", "chat.completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({{{"index", 0}, {"message", message}, {"logprobs", nullptr},
                                    {"finish_reason", finish_reason}}})},
          {"usage", usage_json(usage)}};
}

std::string tool_call_id(const ResponseHead& h, size_t index) {
  std::string tail = h.id.substr(h.id.find('-') + 1);  // "chatcmpl-<start>-<n>" -> "<start>-<n>"
  std::replace(tail.begin(), tail.end(), '-', '_');
  return cat("call_", tail, "_", index);
}

json tool_call_chunk_delta(const ResponseHead& h, size_t index, const std::string* name, const std::string& arguments) {
  json call = {{"index", index}};
  if (name) {
    call["id"] = tool_call_id(h, index);
    call["type"] = "function";
    call["function"] = {{"name", *name}, {"arguments", arguments}};
  } else {
    call["function"] = {{"arguments", arguments}};
  }
  return {{"tool_calls", json::array({call})}};
}

json chat_chunk(const ResponseHead& h, const json& delta, const std::optional<std::string>& finish_reason) {
  return {{"id", h.id},
          {"object", "chat.completion.chunk"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr},
                                    {"finish_reason", finish(finish_reason)}}})}};
}

json text_completion(const ResponseHead& h, const std::string& text, const std::string& finish_reason,
                     const Usage& usage) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr},
                                    {"finish_reason", finish_reason}}})},
          {"usage", usage_json(usage)}};
}

json text_chunk(const ResponseHead& h, const std::string& text, const std::optional<std::string>& finish_reason) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr},
                                    {"finish_reason", finish(finish_reason)}}})}};
}

json usage_chunk(const ResponseHead& h, bool chat, const Usage& usage) {
  return {{"id", h.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array()},
          {"usage", usage_json(usage)}};
}

json models_list(const std::vector<std::string>& ids, int64_t created) {
  json data = json::array();
  for (const auto& id : ids) data.push_back({{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "deltafin"}});
  return {{"object", "list"}, {"data", data}};
}

std::string sse_event(const json& j) { return "data: " + dump_line(j) + "\n\n"; }
std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace deltafin::api
