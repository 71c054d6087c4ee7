// Tool calls and tool results for the K3 chat renderer (k3-model.md §9.3):
// reading and checking an assistant message's tool_calls, and deciding the
// order and tool names of the tool messages that answer them. Nothing here
// writes segments; chat_template.cpp renders what these functions return.
// Errors are deltafin::Error naming the offending field under `path`.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deltafin {

// One argument block: open(argument, key, type) text close.
struct ToolArgument {
  std::string key;
  std::string type;  // §9.3 type name: "string", "number", "boolean", "null", "object", "array"
  std::string text;  // strings as they are, other values as Jinja's tojson
};

struct ToolCall {
  const nlohmann::ordered_json* id;  // into the message; nullptr when the call has no id
  std::string function_name;
  std::vector<ToolArgument> arguments;  // in the given order
  // An argument string that is not JSON, kept verbatim as one json block
  // (then `arguments` is empty).
  std::optional<std::string> unparsed_arguments;
};

// The message's `tool_calls`, checked call by call in order. Empty when the
// field is absent, null or [].
std::vector<ToolCall> read_tool_calls(const nlohmann::ordered_json& message, const std::string& path);

// One tool message in render order, with the tool name the reordering gave it.
struct ToolTurn {
  size_t message_index;
  std::optional<std::string> tool_name;
};

// The run messages[begin, end) of tool messages directly after an assistant
// message whose calls are `calls`: in call order when every message's
// tool_call_id (else id) names one of the calls, each then taking that call's
// function name; otherwise as written, with no names assigned.
std::vector<ToolTurn> order_tool_run(const nlohmann::ordered_json& messages, size_t begin, size_t end,
                                     const std::vector<ToolCall>& calls);

// The `tool` attribute of a tool message that is the `index`-th (1-based)
// since the latest assistant message: the name the reordering assigned, else
// a truthy `tool`, else a truthy `name`, else the function name of call
// #index of `calls`.
std::string tool_message_name(const nlohmann::ordered_json& message, const std::string& path,
                              const std::optional<std::string>& assigned_name, size_t index,
                              const std::vector<ToolCall>& calls);

}  // namespace deltafin
