#include "server/api/anthropic_format.h"

#include "server/api/json_fields.h"
#include "util/error.h"

namespace deltafin::api {

using json = nlohmann::ordered_json;

namespace {

std::string dump_line(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const char* error_type_for(const ApiError& e) {
  switch (e.status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return e.status >= 500 ? "api_error" : "invalid_request_error";
  }
}

// The arguments as an object, or nullopt when they are not one (or nest
// deeper than requests may).
std::optional<fields::Json> arguments_object(const std::string& text) {
  try {
    fields::Json j = fields::parse_json(text, /*allow_exceptions=*/false);
    if (j.is_object()) return j;
  } catch (const fields::TooDeep&) {
  }
  return std::nullopt;
}

}  // namespace

json anthropic_error(const ApiError& e) {
  return {{"type", "error"}, {"error", {{"type", error_type_for(e)}, {"message", e.what()}}}};
}

json message_usage(const MessageUsage& u) {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
          {"output_tokens", u.output_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.cached_tokens},
          {"output_tokens_details", {{"thinking_tokens", u.thinking_tokens}}}};
}

std::string anthropic_event(const std::string& name, const json& data) {
  return "event: " + name + "\ndata: " + dump_line(data) + "\n\n";
}

std::string anthropic_ping() { return anthropic_event("ping", {{"type", "ping"}}); }

MessageBlocks::MessageBlocks(std::string message_id, bool show_thinking)
    : tail_(message_id.substr(message_id.find('_') + 1)), show_thinking_(show_thinking) {}

std::string MessageBlocks::close() {
  if (!open_) return "";
  open_.reset();
  return anthropic_event("content_block_stop", {{"type", "content_block_stop"}, {"index", content_.size() - 1}});
}

std::string MessageBlocks::open(const char* type) {
  if (open_ && *open_ == type) return "";
  std::string out = close();
  json block = {{"type", type}};
  if (std::string_view(type) == "thinking") {
    block["thinking"] = "";
    block["signature"] = "";
  } else {
    block["text"] = "";
  }
  content_.push_back(block);
  open_ = type;
  return out + anthropic_event("content_block_start",
                               {{"type", "content_block_start"}, {"index", content_.size() - 1}, {"content_block", block}});
}

std::string MessageBlocks::complete_call() {
  if (!call_held_) return "";
  call_held_ = false;
  std::string out = close();
  if (std::optional<fields::Json> input = arguments_object(call_arguments_)) {
    const std::string id = cat("toolu_", tail_, "_", tool_uses_++);
    const size_t k = content_.size();
    json start = {{"type", "tool_use"}, {"id", id}, {"name", call_name_}, {"input", json::object()}};
    json block = start;
    block["input"] = std::move(*input);
    content_.push_back(block);
    out += anthropic_event("content_block_start", {{"type", "content_block_start"}, {"index", k}, {"content_block", start}});
    out += anthropic_event("content_block_delta",
                           {{"type", "content_block_delta"}, {"index", k},
                            {"delta", {{"type", "input_json_delta"}, {"partial_json", call_arguments_}}}});
    out += anthropic_event("content_block_stop", {{"type", "content_block_stop"}, {"index", k}});
    return out;
  }
  const std::string shown = cat("[tool call ", call_name_, ": ", call_arguments_, "]");
  out += open("text");
  content_.back()["text"] = shown;
  out += anthropic_event("content_block_delta", {{"type", "content_block_delta"}, {"index", content_.size() - 1},
                                                 {"delta", {{"type", "text_delta"}, {"text", shown}}}});
  return out + close();
}

std::string MessageBlocks::push(const ChatDelta& d) {
  std::string out;
  if (!d.reasoning.empty()) {
    out += complete_call() + open("thinking");
    if (show_thinking_) {
      content_.back()["thinking"] = content_.back()["thinking"].get<std::string>() + d.reasoning;
      out += anthropic_event("content_block_delta", {{"type", "content_block_delta"}, {"index", content_.size() - 1},
                                                     {"delta", {{"type", "thinking_delta"}, {"thinking", d.reasoning}}}});
    }
  }
  if (!d.content.empty()) {
    out += complete_call() + open("text");
    content_.back()["text"] = content_.back()["text"].get<std::string>() + d.content;
    out += anthropic_event("content_block_delta", {{"type", "content_block_delta"}, {"index", content_.size() - 1},
                                                   {"delta", {{"type", "text_delta"}, {"text", d.content}}}});
  }
  for (const ToolCallDelta& call : d.tool_calls) {
    if (call.begins) {
      out += complete_call() + close();
      call_held_ = true;
      call_name_ = call.name;
      call_arguments_.clear();
    }
    if (!call_held_) continue;  // pieces of a call already completed
    call_arguments_ += call.arguments;
    if (call.ends) out += complete_call();
  }
  return out;
}

std::string MessageBlocks::finish() { return complete_call() + close(); }

json message_json(const std::string& id, const std::string& model, const json& content, const std::string& stop_reason,
                  const std::optional<std::string>& stop_sequence, const MessageUsage& usage) {
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", content},
          {"stop_reason", stop_reason},
          {"stop_sequence", stop_sequence ? json(*stop_sequence) : json(nullptr)},
          {"usage", message_usage(usage)}};
}

json message_start_json(const std::string& id, const std::string& model, int64_t prompt_tokens) {
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", json::array()},
          {"stop_reason", nullptr},
          {"stop_sequence", nullptr},
          {"usage", {{"input_tokens", prompt_tokens}, {"output_tokens", 0}}}};
}

}  // namespace deltafin::api
