// The K3 chat renderer, k3-model.md §9. The upstream template is Jinja run by
// Python, so every value that reaches the text is formatted the way Python
// would (python_format.h: str() for attribute values, json.dumps for JSON).
// Tool calls and tool results are read and ordered by chat_tools.h; this file
// holds the segment writer and the document rules.
//
// Decisions where §9 is silent (each also noted at its code, here or in
// chat_tools.cpp):
// - A missing field counts as null (no content, no arguments, no name).
// - `name`, `tool` and the reasoning fields use Python truthiness, as the
//   template's `or` / `if` would; attribute values that are arrays or objects
//   are rejected instead of rendered as Python reprs.
// - Content parts must be objects with type "text" (or no type) and a string
//   `text`; any type containing "image" gets the no-vision error, other types
//   an unsupported-type error.
// - Reasoning fields must be strings or null; the chosen one is emitted
//   untrimmed (blankness only decides whether it is emitted).
// - Tool-call arguments given as JSON values are rendered with Jinja's tojson
//   (json.dumps, ensure_ascii=False): non-ASCII stays UTF-8, keys keep their
//   order. Arguments that are neither null, object nor string are an error.
// - A tool call needs a `function` object with a non-empty string `name`.
// - A tool message whose name cannot be resolved is an error. Its index counts
//   every tool message since the latest assistant message (or since the start
//   of the conversation if there is none), whatever lies in between.
// - Reordering applies only to the run of tool messages directly after an
//   assistant message; call ids and message ids are compared as JSON values
//   (null never matches); several messages naming one call keep their order.
// - tool_choice must be null, "auto", "required", "none" or an object (a named
//   function); response_format must be null or have type "text",
//   "json_object" or "json_schema"; the schema fallback chain (§9.4) takes the
//   first candidate that is present and not null.
// - reasoning_effort is validated even with thinking off.
#include "model/kimi_k3/chat/chat_template.h"

#include <utility>

#include "model/kimi_k3/chat/chat_tools.h"
#include "tokenizer/python_format.h"
#include "util/error.h"

namespace deltafin {

std::string k3_reasoning_level(std::string_view openai_level) {
  if (openai_level == "minimal" || openai_level == "low") return "low";
  if (openai_level == "medium" || openai_level == "high") return "high";
  if (openai_level == "max") return "max";
  return "";
}

std::string k3_effort_for(const std::optional<std::string>& openai_level) {
  if (!openai_level) return "max";
  const std::string level = k3_reasoning_level(*openai_level);
  return level.empty() ? *openai_level : level;
}
namespace {

using Json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------
// Segments (§9.1).

struct Attr {
  std::string key;
  std::string value;  // already formatted Python-style, not yet escaped
};

// '&' first, so the '&' of an inserted "&quot;" is not escaped again.
std::string escape_attribute(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

class SegmentWriter {
public:
  void control(std::string_view text) { add(text, true); }
  void text(std::string_view text) { add(text, false); }

  void open(std::string_view tag, const std::vector<Attr>& attrs = {}) {
    control("<|open|>");
    text(tag);
    for (const Attr& a : attrs) {
      text(" " + a.key);
      text("=\"");
      text(escape_attribute(a.value));
      text("\"");
    }
    control("<|sep|>");
  }
  void close(std::string_view tag) {
    control("<|close|>");
    text(tag);
    control("<|sep|>");
  }
  void eom() { control("<|end_of_msg|>"); }

  std::vector<ChatSegment> take() { return std::move(segments_); }

private:
  // Empty segments are dropped (§9.1): they would tokenise to nothing anyway,
  // and dropping them keeps segment counts independent of empty fields.
  void add(std::string_view text, bool control) {
    if (!text.empty()) segments_.push_back({std::string(text), control});
  }

  std::vector<ChatSegment> segments_;
};

// ---------------------------------------------------------------------------
// Internal system message bodies (§9.4), verbatim.

constexpr std::string_view kEffortBody =
    "`thinking_effort` guides on how much to think in your thinking channel (not including the "
    "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
    "Now the system is invoked with `thinking_effort=";
constexpr std::string_view kStaticToolsBody =
    "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n";
constexpr std::string_view kDynamicToolsBody =
    "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
    "You have access to all existing and extended tools.\n"
    "Here are the specs for the extended tools.\n\n```json\n";
constexpr std::string_view kToolChoiceRequiredBody =
    "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.";
constexpr std::string_view kToolChoiceNoneBody =
    "The system is invoked with `tool_choice=none`.\n"
    "You MUST NOT call any tools in the next message.";
constexpr std::string_view kJsonObjectBody =
    "The system is invoked with `response_format=json_object`.\n"
    "Your response must be raw JSON data without markdown code blocks (```json) or any "
    "additional formatting.";
constexpr std::string_view kJsonSchemaBody =
    "The system is invoked with `response_format=json_schema`.\n"
    "Your response must be raw JSON data without markdown code blocks (```json) or any "
    "additional formatting.\n"
    "The JSON data must match the following schema:\n```json\n";
constexpr std::string_view kCodeBlockEnd = "\n```";

// ---------------------------------------------------------------------------
// Message fields.

// The field, or nullptr when the key is absent.
const Json* find_field(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const char* kind(const Json* v) { return v ? v->type_name() : "nothing"; }

// §9.1 content: string -> one segment; array -> its text parts joined into one; null -> nothing.
void write_content(SegmentWriter& w, const Json& message, const std::string& path) {
  const std::string field = path + ".content";
  const Json* content = find_field(message, "content");
  if (!content || content->is_null()) return;
  if (content->is_string()) {
    w.text(content->get_ref<const std::string&>());
    return;
  }
  if (!content->is_array()) {
    fail(field, ": expected string, array of text parts or null, got ", content->type_name());
  }
  // The parts are one text: ["Hello ", "there"] tokenises as "Hello there"
  // (a boundary between parts must not become a token boundary).
  std::string joined;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_field = cat(field, "[", i, "]");
    if (!part.is_object()) fail(part_field, ": expected a text part object, got ", part.type_name());
    if (const Json* type = find_field(part, "type")) {
      if (!type->is_string()) fail(part_field, ".type: expected string, got ", type->type_name());
      const std::string& t = type->get_ref<const std::string&>();
      if (t.find("image") != std::string::npos) {
        fail(part_field, ": image parts are not supported (this runtime runs no vision tower)");
      }
      if (t != "text") fail(part_field, ".type: unsupported content part type \"", t, "\" (expected \"text\")");
    }
    const Json* text = find_field(part, "text");
    if (!text || !text->is_string()) fail(part_field, ".text: expected string, got ", kind(text));
    joined += text->get_ref<const std::string&>();
  }
  w.text(joined);
}

// `name` only when truthy (§9.2), for user, system and assistant.
void add_name_attribute(std::vector<Attr>& attrs, const Json& message, const std::string& path) {
  const Json* name = find_field(message, "name");
  if (name && python_truthy(*name)) attrs.push_back({"name", python_str(*name, path + ".name")});
}

const std::string& role_of(const Json& message, const std::string& path) {
  if (!message.is_object()) fail(path, ": expected a message object, got ", message.type_name());
  const Json* role = find_field(message, "role");
  if (!role || !role->is_string()) fail(path, ".role: expected string, got ", kind(role));
  const std::string& r = role->get_ref<const std::string&>();
  if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
    fail(path, ".role: unknown role \"", r, "\" (expected system, user, assistant or tool)");
  }
  return r;
}

// ---------------------------------------------------------------------------
// The document (§9.2-§9.4).

class Renderer {
public:
  explicit Renderer(const ChatOptions& options) : options_(options) {}

  std::vector<ChatSegment> render(const Json& messages) {
    check_options();
    if (options_.tools.is_array() && !options_.tools.empty()) {
      const std::string declared = python_json_dumps(Json(options_.tools), kJsonCompactSorted);
      internal_message("tool-declare", cat(kStaticToolsBody, declared, kCodeBlockEnd));
    }
    if (options_.thinking && options_.reasoning_effort) {
      internal_message("thinking-effort", cat(kEffortBody, *options_.reasoning_effort, "`."));
    }
    conversation(messages);
    tool_choice_message();
    response_format_message();
    if (options_.add_generation_prompt) {
      w_.open("message", {{"role", "assistant"}});
      w_.open(options_.thinking ? "think" : "response");
    }
    return w_.take();
  }

private:
  void check_options() const {
    if (const auto& effort = options_.reasoning_effort) {
      if (*effort != "low" && *effort != "high" && *effort != "max") {
        fail("reasoning_effort: expected \"low\", \"high\" or \"max\", got \"", *effort, "\"");
      }
    }
    if (!options_.tools.is_null() && !options_.tools.is_array()) {
      fail("tools: expected array or null, got ", options_.tools.type_name());
    }
  }

  // §9.2: open(message, role=system, type), the trimmed body, close, eom.
  void internal_message(std::string_view type, std::string_view body) {
    w_.open("message", {{"role", "system"}, {"type", std::string(type)}});
    w_.text(python_strip(body));
    w_.close("message");
    w_.eom();
  }

  void conversation(const Json& messages) {
    if (!messages.is_array()) fail("messages: expected array, got ", messages.type_name());
    size_t i = 0;
    while (i < messages.size()) {
      const Json& message = messages[i];
      const std::string path = cat("messages[", i, "]");
      const std::string& role = role_of(message, path);
      ++i;
      if (role == "assistant") {
        assistant(message, path);
        size_t end = i;
        while (end < messages.size() && role_of(messages[end], cat("messages[", end, "]")) == "tool") ++end;
        for (const ToolTurn& turn : order_tool_run(messages, i, end, calls_)) {
          tool(messages[turn.message_index], cat("messages[", turn.message_index, "]"), turn.tool_name);
        }
        i = end;
      } else if (role == "tool") {
        tool(message, path, std::nullopt);
      } else if (role == "system") {
        system(message, path);
      } else {
        plain_message(message, path, "user");
      }
    }
  }

  // user, and system without tools: open(message, role[, name]) content close eom.
  void plain_message(const Json& message, const std::string& path, const std::string& role) {
    std::vector<Attr> attrs{{"role", role}};
    add_name_attribute(attrs, message, path);
    w_.open("message", attrs);
    write_content(w_, message, path);
    w_.close("message");
    w_.eom();
  }

  // A system message with truthy tools declares them instead of its content.
  void system(const Json& message, const std::string& path) {
    const Json* tools = find_field(message, "tools");
    if (!tools || !python_truthy(*tools)) {
      plain_message(message, path, "system");
      return;
    }
    if (!tools->is_array()) fail(path, ".tools: expected array, got ", tools->type_name());
    internal_message("tool-declare",
                     cat(kDynamicToolsBody, python_json_dumps(*tools, kJsonCompactSorted), kCodeBlockEnd));
  }

  void assistant(const Json& message, const std::string& path) {
    std::vector<Attr> attrs{{"role", "assistant"}};
    add_name_attribute(attrs, message, path);
    w_.open("message", attrs);
    if (options_.thinking) {
      w_.open("think");
      reasoning(message, path);
      w_.close("think");
    }
    w_.open("response");
    write_content(w_, message, path);
    w_.close("response");
    calls_ = tool_calls(message, path);
    w_.close("message");
    w_.eom();
    tools_since_assistant_ = 0;
  }

  // reasoning_content if truthy, else reasoning; emitted only when non-blank.
  void reasoning(const Json& message, const std::string& path) {
    const Json* chosen = nullptr;
    for (const char* key : {"reasoning_content", "reasoning"}) {
      const Json* value = find_field(message, key);
      if (value && !value->is_null() && !value->is_string()) {
        fail(path, ".", key, ": expected string or null, got ", value->type_name());
      }
      if (!chosen && value && python_truthy(*value)) chosen = value;
    }
    if (chosen && !python_is_blank(chosen->get_ref<const std::string&>())) {
      w_.text(chosen->get_ref<const std::string&>());
    }
  }

  // The tools block of an assistant message (§9.3); returns the calls for the
  // tool messages after it.
  std::vector<ToolCall> tool_calls(const Json& message, const std::string& path) {
    std::vector<ToolCall> calls = read_tool_calls(message, path);
    if (calls.empty()) return calls;
    w_.open("tools");
    for (size_t k = 0; k < calls.size(); ++k) {
      const ToolCall& call = calls[k];
      w_.open("call", {{"tool", call.function_name}, {"index", std::to_string(k + 1)}});
      if (call.unparsed_arguments) {
        w_.open("json", {{"type", "object"}});
        w_.text(*call.unparsed_arguments);
        w_.close("json");
      }
      for (const ToolArgument& argument : call.arguments) {
        w_.open("argument", {{"key", argument.key}, {"type", argument.type}});
        w_.text(argument.text);
        w_.close("argument");
      }
      w_.close("call");
    }
    w_.close("tools");
    return calls;
  }

  // open(message, role=tool, tool=<name>, index=<i>) content close eom.
  void tool(const Json& message, const std::string& path, const std::optional<std::string>& assigned_name) {
    const size_t index = ++tools_since_assistant_;
    const std::string name = tool_message_name(message, path, assigned_name, index, calls_);
    w_.open("message", {{"role", "tool"}, {"tool", name}, {"index", std::to_string(index)}});
    write_content(w_, message, path);
    w_.close("message");
    w_.eom();
  }

  void tool_choice_message() {
    const nlohmann::json& choice = options_.tool_choice;
    if (choice.is_null() || choice.is_object()) return;  // an object names a function: no message
    if (!choice.is_string()) {
      fail("tool_choice: expected \"auto\", \"required\", \"none\", an object or null, got ", choice.type_name());
    }
    const std::string& value = choice.get_ref<const std::string&>();
    if (value == "required") {
      internal_message("tool-choice", kToolChoiceRequiredBody);
    } else if (value == "none") {
      internal_message("tool-choice", kToolChoiceNoneBody);
    } else if (value != "auto") {
      fail("tool_choice: unknown value \"", value, "\" (expected \"auto\", \"required\" or \"none\")");
    }
  }

  void response_format_message() {
    const nlohmann::json& format = options_.response_format;
    if (format.is_null()) return;
    if (!format.is_object()) fail("response_format: expected object or null, got ", format.type_name());
    const auto type = format.find("type");
    if (type == format.end() || !type->is_string()) {
      fail("response_format.type: expected string, got ", type == format.end() ? "nothing" : type->type_name());
    }
    const std::string& value = type->get_ref<const std::string&>();
    if (value == "text") return;
    if (value == "json_object") {
      internal_message("response-format", kJsonObjectBody);
      return;
    }
    if (value != "json_schema") {
      fail("response_format.type: unknown value \"", value, "\" (expected \"text\", \"json_object\" or \"json_schema\")");
    }
    const auto outer = format.find("json_schema");
    if (outer == format.end() || !outer->is_object()) {
      fail("response_format.json_schema: expected object, got ", outer == format.end() ? "nothing" : outer->type_name());
    }
    // §9.4: .json_schema.schema, else .json_schema.json_schema, else .json_schema.
    const nlohmann::json* schema = &*outer;
    for (const char* key : {"schema", "json_schema"}) {
      const auto inner = outer->find(key);
      if (inner != outer->end() && !inner->is_null()) {
        schema = &*inner;
        break;
      }
    }
    internal_message("response-format",
                     cat(kJsonSchemaBody, python_json_dumps(Json(*schema), kJsonCompactSorted), kCodeBlockEnd));
  }

  const ChatOptions& options_;
  SegmentWriter w_;
  std::vector<ToolCall> calls_;  // of the latest assistant message; empty before one
  size_t tools_since_assistant_ = 0;
};

}  // namespace

std::vector<ChatSegment> render_chat(const nlohmann::ordered_json& messages, const ChatOptions& options) {
  return Renderer(options).render(messages);
}

std::vector<ChatSegment> render_chat(const nlohmann::json& messages, const ChatOptions& options) {
  return render_chat(nlohmann::ordered_json(messages), options);
}

std::string render_chat_text(const std::vector<ChatSegment>& segments) {
  std::string text;
  for (const ChatSegment& segment : segments) text += segment.text;
  return text;
}

std::vector<uint32_t> encode_chat(const std::vector<ChatSegment>& segments,
                                  const ChatSegmentEncoder& encode_segment) {
  std::vector<uint32_t> ids;
  for (const ChatSegment& segment : segments) {
    if (segment.text.empty()) continue;  // render_chat never makes one; hand-built lists might
    const std::vector<uint32_t> part = encode_segment(segment.text, segment.control);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

}  // namespace deltafin
