// Anthropic Messages request validation and translation (anthropic_request.h).
//
// Each check names the field by its Anthropic path ("messages[1].content[0]
// .tool_use_id"). The translated chat request then goes through the OpenAI
// route's own validation (parse_request_json), so everything that route
// promises — above all, that an accepted chat renders — holds here too; a
// failure there would mean this translation is wrong, and says so.
#include "server/api/anthropic_request.h"

#include <string>
#include <vector>

#include "server/api/json_fields.h"
#include "util/error.h"

namespace deltafin::api {
namespace {

using namespace fields;

constexpr size_t kMaxStopSequences = 16;
constexpr size_t kMaxTools = 128;

constexpr std::string_view kCreateFields[] = {
    "model", "max_tokens", "messages", "system", "stop_sequences", "stream", "temperature", "top_p", "top_k",
    "tools", "tool_choice", "thinking", "output_config", "metadata", "service_tier", "speed", "cache_control",
    "context_management"};
constexpr std::string_view kCountFields[] = {"model",         "messages",      "system",
                                             "tools",         "tool_choice",   "thinking",
                                             "output_config", "cache_control", "context_management"};

// Fields of Anthropic's API that ask for something deltafin does not run:
// refused by name with the reason, rather than as merely unknown.
struct Refused {
  std::string_view field, why;
};
constexpr Refused kRefusedFields[] = {
    {"container", "deltafin runs no code-execution containers"},
    {"mcp_servers", "deltafin connects to no MCP servers; run the tools on the client"},
    {"inference_geo", "deltafin runs on this machine only"},
};

void check_known_fields(const Json& body, bool count_tokens) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& key = it.key();
    for (const Refused& r : kRefusedFields)
      if (key == r.field) unsupported(key, cat(r.why, "."));
    if (!(count_tokens ? contains(kCountFields, key) : contains(kCreateFields, key))) unknown(key);
  }
}

// cache_control: {"type": "ephemeral", "ttl"?: "5m" | "1h"}. Accepted and
// nothing more: every prefix deltafin computes is kept for reuse already.
void check_cache_control(const Json& block, const std::string& path) {
  const Json* cc = given(block, "cache_control");
  if (!cc) return;
  const std::string field = join(path, "cache_control");
  if (!cc->is_object()) invalid_type(field, "an object", *cc);
  only_keys(*cc, field, {"type", "ttl"});
  const Json* type = given(*cc, "type");
  if (!type) missing(join(field, "type"));
  if (string_field(*type, join(field, "type")) != "ephemeral")
    invalid_value(join(field, "type"), cat("expected \"ephemeral\", but got ", describe(*type), "."));
  if (const Json* ttl = given(*cc, "ttl")) {
    const std::string& t = string_field(*ttl, join(field, "ttl"));
    if (t != "5m" && t != "1h") invalid_value(join(field, "ttl"), cat("expected \"5m\" or \"1h\", but got ", describe(*ttl), "."));
  }
}

const std::string& block_type(const Json& block, const std::string& path) {
  if (!block.is_object()) invalid_type(path, "a content block object", block);
  const Json* type = given(block, "type");
  if (!type) missing(join(path, "type"));
  return string_field(*type, join(path, "type"));
}

[[noreturn]] void unsupported_block(const std::string& path, const std::string& type, std::string_view allowed) {
  if (type == "image" || type == "document" || type == "search_result")
    unsupported(join(path, "type"), cat("only text is supported (no vision or document reader runs); got \"", clip(type), "\"."));
  if (type == "redacted_thinking")
    unsupported(join(path, "type"), "redacted_thinking blocks cannot be read back by this model; leave them out.");
  invalid_value(join(path, "type"), cat("expected ", allowed, ", but got \"", clip(type), "\"."));
}

// A text block: {"type": "text", "text", "cache_control"?, "citations"? (null or [])}.
const std::string& text_of(const Json& block, const std::string& path) {
  only_keys(block, path, {"type", "text", "cache_control", "citations"});
  check_cache_control(block, path);
  if (const Json* c = given(block, "citations")) {
    if (!c->is_array()) invalid_type(join(path, "citations"), "an array", *c);
    if (!c->empty()) unsupported(join(path, "citations"), "citations are not supported.");
  }
  const Json* text = given(block, "text");
  if (!text) missing(join(path, "text"));
  return string_field(*text, join(path, "text"));
}

// A string or an array of text blocks -> OpenAI content (a string or text parts).
Json text_content(const Json& content, const std::string& path) {
  if (content.is_string()) return content;
  if (!content.is_array()) invalid_type(path, "a string or an array of text blocks", content);
  Json parts = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = index(path, i);
    const std::string& type = block_type(content[i], p);
    if (type != "text") unsupported_block(p, type, "\"text\"");
    parts.push_back({{"type", "text"}, {"text", text_of(content[i], p)}});
  }
  return parts;
}

// Tool names: Anthropic's and OpenAI's rule, 1..64 of [A-Za-z0-9_-].
const std::string& tool_name(const Json& v, const std::string& path) {
  const std::string& name = string_field(v, path);
  const bool ok = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (!ok) invalid_value(path, cat("a tool name must be 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-', but got ", describe(v), "."));
  return name;
}

// ---------------------------------------------------------------------------
// Messages.

// The tool_use blocks (id, name) of the assistant message just before.
using CallIds = std::vector<std::pair<std::string, std::string>>;

const std::string* call_name(const CallIds& calls, const std::string& id) {
  for (const auto& [call_id, name] : calls)
    if (call_id == id) return &name;
  return nullptr;
}

// A user message -> tool messages (its tool_result blocks, which come first)
// and then a user message (its text blocks, if any).
void add_user(const Json& content, const std::string& path, const CallIds& calls, Json& out) {
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  if (!content.is_array()) invalid_type(path, "a string or an array of content blocks", content);
  if (content.empty()) invalid_value(path, "a user message needs at least one content block.");
  Json parts = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = index(path, i);
    const Json& block = content[i];
    const std::string& type = block_type(block, p);
    if (type == "text") {
      parts.push_back({{"type", "text"}, {"text", text_of(block, p)}});
      continue;
    }
    if (type != "tool_result") unsupported_block(p, type, "\"text\" or \"tool_result\"");
    if (!parts.empty())
      invalid_value(p, "tool_result blocks must come before any text in a user message (as the Messages API requires).");
    only_keys(block, p, {"type", "tool_use_id", "content", "is_error", "cache_control"});
    check_cache_control(block, p);
    const Json* id = given(block, "tool_use_id");
    if (!id) missing(join(p, "tool_use_id"));
    const std::string& use_id = string_field(*id, join(p, "tool_use_id"));
    const std::string* name = call_name(calls, use_id);
    if (!name)
      invalid_value(join(p, "tool_use_id"), cat("'", clip(use_id), "' is not the id of a tool_use block in the "
                                                "assistant message just before this one."));
    Json text = "";
    if (const Json* c = given(block, "content")) text = text_content(*c, join(p, "content"));
    bool is_error = false;
    if (const Json* e = given(block, "is_error")) is_error = bool_field(*e, join(p, "is_error"));
    if (is_error) {  // the template has no error flag: the text says it
      if (text.is_string()) {
        text = "Error: " + text.get<std::string>();
      } else {
        text.insert(text.begin(), Json{{"type", "text"}, {"text", "Error: "}});
      }
    }
    // The call's name goes along, so the result still resolves when a
    // mid-conversation system message stands between the call and it.
    out.push_back({{"role", "tool"}, {"tool_call_id", use_id}, {"name", *name}, {"content", text}});
  }
  if (!parts.empty()) out.push_back({{"role", "user"}, {"content", parts}});
}

// An assistant message -> one assistant message: text as content, thinking
// as reasoning_content, tool_use blocks as tool_calls. Returns its call ids.
CallIds add_assistant(const Json& content, const std::string& path, Json& out) {
  Json message = {{"role", "assistant"}};
  CallIds ids;
  if (content.is_string()) {
    message["content"] = content;
    out.push_back(message);
    return ids;
  }
  if (!content.is_array()) invalid_type(path, "a string or an array of content blocks", content);
  if (content.empty()) invalid_value(path, "an assistant message needs at least one content block.");
  Json parts = Json::array(), calls = Json::array();
  std::string reasoning;
  bool has_reasoning = false;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = index(path, i);
    const Json& block = content[i];
    const std::string& type = block_type(block, p);
    if (type == "text") {
      parts.push_back({{"type", "text"}, {"text", text_of(block, p)}});
    } else if (type == "thinking") {
      only_keys(block, p, {"type", "thinking", "signature"});
      const Json* t = given(block, "thinking");
      if (!t) missing(join(p, "thinking"));
      if (has_reasoning) reasoning += "\n\n";
      reasoning += string_field(*t, join(p, "thinking"));
      has_reasoning = true;
      if (const Json* s = given(block, "signature")) string_field(*s, join(p, "signature"));
    } else if (type == "tool_use") {
      only_keys(block, p, {"type", "id", "name", "input", "cache_control"});
      check_cache_control(block, p);
      const Json* id = given(block, "id");
      if (!id) missing(join(p, "id"));
      const std::string& call_id = string_field(*id, join(p, "id"));
      if (call_id.empty()) invalid_value(join(p, "id"), "a tool_use id must not be empty.");
      if (call_name(ids, call_id)) invalid_value(join(p, "id"), cat("the id '", clip(call_id), "' is used twice in this message."));
      const Json* name = given(block, "name");
      if (!name) missing(join(p, "name"));
      const std::string& fn = tool_name(*name, join(p, "name"));
      const Json* input = given(block, "input");
      if (!input) missing(join(p, "input"));
      if (!input->is_object()) invalid_type(join(p, "input"), "an object", *input);
      calls.push_back({{"id", call_id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", *input}}}});
      ids.emplace_back(call_id, fn);
    } else {
      unsupported_block(p, type, "\"text\", \"thinking\" or \"tool_use\"");
    }
  }
  if (has_reasoning) message["reasoning_content"] = reasoning;
  if (!parts.empty() || calls.empty()) message["content"] = parts;
  if (!calls.empty()) message["tool_calls"] = calls;
  out.push_back(message);
  return ids;
}

Json translate_messages(const Json& body) {
  Json out = Json::array();
  if (const Json* system = given(body, "system")) {
    const Json content = text_content(*system, "system");
    if (!(content.is_array() && content.empty())) out.push_back({{"role", "system"}, {"content", content}});
  }
  const Json* messages = given(body, "messages");
  if (!messages) missing("messages");
  if (!messages->is_array()) invalid_type("messages", "an array of message objects", *messages);
  if (messages->empty()) invalid_value("messages", "expected at least one message, but got an empty array.");
  CallIds calls;  // of the assistant message just before
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string path = index("messages", i);
    const Json& m = (*messages)[i];
    if (!m.is_object()) invalid_type(path, "a message object", m);
    only_keys(m, path, {"role", "content"});
    const Json* role = given(m, "role");
    if (!role) missing(join(path, "role"));
    const std::string& r = string_field(*role, join(path, "role"));
    const Json* content = given(m, "content");
    if (!content) missing(join(path, "content"));
    if (r == "user") {
      add_user(*content, join(path, "content"), calls, out);
      calls.clear();
    } else if (r == "system") {  // a mid-conversation system message (Claude Code sends them)
      out.push_back({{"role", "system"}, {"content", text_content(*content, join(path, "content"))}});
    } else if (r == "assistant") {
      if (i + 1 == messages->size())
        unsupported(path, "a final assistant message (a prefilled answer to continue) is not supported; end with a "
                          "user message.");
      calls = add_assistant(*content, join(path, "content"), out);
    } else {
      invalid_value(join(path, "role"), cat("expected \"user\", \"assistant\" or \"system\", but got ", describe(*role), "."));
    }
  }
  return out;
}

// context_management: the one edit deltafin can make on the messages it is
// given, clear_thinking_20251015 (Claude Code sends it), drops the thinking
// of all but the last `keep` assistant turns that have some (default 1, as
// Anthropic's); "all" keeps every one. Edits that summarise or clear tool
// results are refused: they would need the model to rewrite the context.
void apply_context_management(const Json& body, Json& messages) {
  const Json* cm = given(body, "context_management");
  if (!cm) return;
  if (!cm->is_object()) invalid_type("context_management", "an object", *cm);
  only_keys(*cm, "context_management", {"edits"});
  const Json* edits = given(*cm, "edits");
  if (!edits) return;
  if (!edits->is_array()) invalid_type("context_management.edits", "an array of edits", *edits);
  for (size_t i = 0; i < edits->size(); ++i) {
    const std::string p = index("context_management.edits", i);
    const Json& edit = (*edits)[i];
    if (!edit.is_object()) invalid_type(p, "an edit object", edit);
    const Json* type = given(edit, "type");
    if (!type) missing(join(p, "type"));
    const std::string& t = string_field(*type, join(p, "type"));
    if (t != "clear_thinking_20251015")
      unsupported(join(p, "type"), cat("only clear_thinking_20251015 is supported (deltafin does not clear tool results "
                                       "or compact the context); got \"", clip(t), "\"."));
    only_keys(edit, p, {"type", "keep"});
    int64_t keep = 1;
    if (const Json* k = given(edit, "keep")) {
      const std::string kp = join(p, "keep");
      if (k->is_string() && k->get_ref<const std::string&>() == "all") continue;
      if (!k->is_object()) invalid_type(kp, "\"all\" or {\"type\": \"all\" | \"thinking_turns\", \"value\"}", *k);
      const Json* kt = given(*k, "type");
      if (!kt) missing(join(kp, "type"));
      const std::string& kind = string_field(*kt, join(kp, "type"));
      if (kind == "all") {
        only_keys(*k, kp, {"type"});
        continue;
      }
      if (kind != "thinking_turns") invalid_value(join(kp, "type"), cat("expected \"all\" or \"thinking_turns\", but got ", describe(*kt), "."));
      only_keys(*k, kp, {"type", "value"});
      const Json* v = given(*k, "value");
      if (!v) missing(join(kp, "value"));
      keep = int64_field(*v, join(kp, "value"), "an integer >= 0");
      if (keep < 0) invalid_value(join(kp, "value"), cat("expected an integer >= 0, but got ", keep, "."));
    }
    for (auto m = messages.rbegin(); m != messages.rend(); ++m) {
      if (!m->contains("reasoning_content")) continue;
      if (keep > 0) {
        --keep;
      } else {
        m->erase("reasoning_content");
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Tools.

Json translate_tool(const Json& tool, const std::string& path) {
  if (!tool.is_object()) invalid_type(path, "a tool object", tool);
  if (const Json* type = given(tool, "type")) {
    const std::string& t = string_field(*type, join(path, "type"));
    if (t != "custom")
      unsupported(join(path, "type"), cat("only custom tools (run by the client) are supported; \"", clip(t),
                                          "\" is a server tool deltafin does not run."));
  }
  only_keys(tool, path, {"type", "name", "description", "input_schema", "cache_control", "strict", "eager_input_streaming"});
  check_cache_control(tool, path);
  const Json* name = given(tool, "name");
  if (!name) missing(join(path, "name"));
  Json function = {{"name", tool_name(*name, join(path, "name"))}};
  if (const Json* d = given(tool, "description")) function["description"] = string_field(*d, join(path, "description"));
  const Json* schema = given(tool, "input_schema");
  if (!schema) missing(join(path, "input_schema"));
  if (!schema->is_object()) invalid_type(join(path, "input_schema"), "a JSON Schema object", *schema);
  function["parameters"] = *schema;
  if (const Json* s = given(tool, "strict")) function["strict"] = bool_field(*s, join(path, "strict"));
  if (const Json* e = given(tool, "eager_input_streaming")) bool_field(*e, join(path, "eager_input_streaming"));
  return {{"type", "function"}, {"function", function}};
}

void translate_tools(const Json& body, Json& chat) {
  const Json* tools = given(body, "tools");
  if (!tools) return;
  if (!tools->is_array()) invalid_type("tools", "an array of tools", *tools);
  if (tools->size() > kMaxTools) invalid_value("tools", cat("expected at most ", kMaxTools, " tools, but got ", tools->size(), "."));
  if (tools->empty()) return;  // Anthropic takes [] for no tools
  Json out = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    out.push_back(translate_tool((*tools)[i], index("tools", i)));
    for (size_t j = 0; j < i; ++j)
      if (out[j]["function"]["name"] == out[i]["function"]["name"])
        invalid_value(index("tools", i), cat("the tool name '", clip(out[i]["function"]["name"].get<std::string>()),
                                             "' is declared twice (also tools[", j, "])."));
  }
  chat["tools"] = out;
}

void translate_tool_choice(const Json& body, Json& chat) {
  const Json* choice = given(body, "tool_choice");
  if (!choice) return;
  if (!choice->is_object()) invalid_type("tool_choice", "an object with a type", *choice);
  const Json* type = given(*choice, "type");
  if (!type) missing("tool_choice.type");
  const std::string& t = string_field(*type, "tool_choice.type");
  const bool has_tools = chat.contains("tools");
  if (t == "none") {
    only_keys(*choice, "tool_choice", {"type"});
    chat["tool_choice"] = "none";
    return;
  }
  if (t == "tool") {
    only_keys(*choice, "tool_choice", {"type", "name", "disable_parallel_tool_use"});
    const Json* name = given(*choice, "name");
    if (!name) missing("tool_choice.name");
    const std::string& wanted = string_field(*name, "tool_choice.name");
    const bool declared = has_tools && std::any_of(chat["tools"].begin(), chat["tools"].end(),
                                                   [&](const Json& tool) { return tool["function"]["name"] == wanted; });
    if (!declared) invalid_value("tool_choice.name", cat("'", clip(wanted), "' is not one of the tools."));
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", wanted}}}};
  } else if (t == "auto" || t == "any") {
    only_keys(*choice, "tool_choice", {"type", "disable_parallel_tool_use"});
    if (t == "any" && !has_tools) invalid_value("tool_choice.type", "\"any\" needs tools to choose from.");
    chat["tool_choice"] = t == "any" ? "required" : "auto";
  } else {
    invalid_value("tool_choice.type", cat("expected \"auto\", \"any\", \"tool\" or \"none\", but got ", describe(*type), "."));
  }
  if (const Json* d = given(*choice, "disable_parallel_tool_use"))
    if (bool_field(*d, "tool_choice.disable_parallel_tool_use")) chat["parallel_tool_calls"] = false;
}

// ---------------------------------------------------------------------------
// Thinking, effort and output format.

// A budget names a level; the level, not the budget, reaches the template.
const char* effort_for_budget(int64_t budget) {
  if (budget < 4'000) return "low";
  if (budget < 16'000) return "medium";
  if (budget < 32'000) return "high";
  return "max";
}

void translate_thinking(const Json& body, const std::optional<int64_t>& max_tokens, Json& chat, MessagesRequest& out) {
  out.chat.thinking = false;  // the Messages API's default: no thinking
  if (const Json* thinking = given(body, "thinking")) {
    if (!thinking->is_object()) invalid_type("thinking", "an object with a type", *thinking);
    const Json* type = given(*thinking, "type");
    if (!type) missing("thinking.type");
    const std::string& t = string_field(*type, "thinking.type");
    if (t == "disabled") {
      only_keys(*thinking, "thinking", {"type"});
    } else if (t == "enabled" || t == "adaptive") {
      only_keys(*thinking, "thinking", t == "enabled" ? std::initializer_list<std::string_view>{"type", "budget_tokens", "display"}
                                                      : std::initializer_list<std::string_view>{"type", "display"});
      out.chat.thinking = true;
      if (const Json* display = given(*thinking, "display")) {
        const std::string& d = string_field(*display, "thinking.display");
        if (d != "summarized" && d != "omitted")
          invalid_value("thinking.display", cat("expected \"summarized\" or \"omitted\", but got ", describe(*display), "."));
        out.show_thinking = d != "omitted";
      }
      if (t == "enabled") {
        const Json* budget = given(*thinking, "budget_tokens");
        if (!budget) missing("thinking.budget_tokens");
        const int64_t b = int64_field(*budget, "thinking.budget_tokens", "an integer >= 1024");
        if (b < 1024) invalid_value("thinking.budget_tokens", cat("expected an integer >= 1024, but got ", b, "."));
        if (max_tokens && b >= *max_tokens)
          invalid_value("thinking.budget_tokens", cat("must be less than max_tokens (", *max_tokens, "), but got ", b, "."));
        chat["reasoning_effort"] = effort_for_budget(b);
      }
    } else {
      invalid_value("thinking.type", cat("expected \"enabled\", \"adaptive\" or \"disabled\", but got ", describe(*type), "."));
    }
  }
  const Json* config = given(body, "output_config");
  if (!config) return;
  if (!config->is_object()) invalid_type("output_config", "an object", *config);
  only_keys(*config, "output_config", {"effort", "format"});
  if (const Json* effort = given(*config, "effort")) {
    const std::string& e = string_field(*effort, "output_config.effort");
    if (e != "low" && e != "medium" && e != "high" && e != "xhigh" && e != "max")
      invalid_value("output_config.effort", cat("expected \"low\", \"medium\", \"high\", \"xhigh\" or \"max\", but got ",
                                                describe(*effort), "."));
    chat["reasoning_effort"] = e == "xhigh" ? "high" : e;
  }
  if (const Json* format = given(*config, "format")) {
    if (!format->is_object()) invalid_type("output_config.format", "an object", *format);
    only_keys(*format, "output_config.format", {"type", "schema"});
    const Json* type = given(*format, "type");
    if (!type) missing("output_config.format.type");
    if (string_field(*type, "output_config.format.type") != "json_schema")
      invalid_value("output_config.format.type", cat("expected \"json_schema\", but got ", describe(*type), "."));
    const Json* schema = given(*format, "schema");
    if (!schema) missing("output_config.format.schema");
    if (!schema->is_object()) invalid_type("output_config.format.schema", "a JSON Schema object", *schema);
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", *schema}}}};
  }
}

// ---------------------------------------------------------------------------
// The rest of /v1/messages.

std::optional<int64_t> max_tokens_of(const Json& body, const RequestLimits& limits, bool count_tokens) {
  if (count_tokens) return std::nullopt;
  const Json* v = given(body, "max_tokens");
  if (!v) missing("max_tokens");
  const std::string range = limits.max_tokens_ceiling > 0
                                ? cat("an integer from 1 to ", limits.max_tokens_ceiling, " (the server's --max-tokens)")
                                : std::string("an integer >= 1");
  const int64_t n = int64_field(*v, "max_tokens", range);
  if (n < 1 || (limits.max_tokens_ceiling > 0 && n > limits.max_tokens_ceiling))
    invalid_value("max_tokens", cat("expected ", range, ", but got ", n, "."));
  return n;
}

std::vector<std::string> stop_sequences(const Json& body) {
  std::vector<std::string> out;
  const Json* stops = given(body, "stop_sequences");
  if (!stops) return out;
  if (!stops->is_array()) invalid_type("stop_sequences", "an array of strings", *stops);
  if (stops->size() > kMaxStopSequences)
    invalid_value("stop_sequences", cat("expected at most ", kMaxStopSequences, " strings, but got ", stops->size(), "."));
  for (size_t i = 0; i < stops->size(); ++i) {
    const std::string& s = string_field((*stops)[i], index("stop_sequences", i));
    if (s.empty()) invalid_value(index("stop_sequences", i), "stop sequences must not be empty.");
    out.push_back(s);
  }
  return out;
}

// temperature, top_p and top_k as on the OpenAI route: greedy decoding, so
// only what leaves the argmax chosen is accepted.
void check_sampling(const Json& body) {
  if (const Json* t = given(body, "temperature")) {
    const double v = number_field(*t, "temperature", "a number from 0 to 1");
    if (!(v >= 0 && v <= 1)) invalid_value("temperature", cat("expected a number from 0 to 1, but got ", t->dump(), "."));
    if (v != 0)
      unsupported("temperature", cat("deltafin decodes greedily (the target model decides every token), so temperature "
                                     "must be 0 or omitted; got ", t->dump(), "."));
  }
  if (const Json* p = given(body, "top_p")) {
    const double v = number_field(*p, "top_p", "a number in (0, 1]");
    if (!(v > 0 && v <= 1)) invalid_value("top_p", cat("expected a number greater than 0 and at most 1, but got ", p->dump(), "."));
  }
  if (const Json* k = given(body, "top_k")) {
    const int64_t v = int64_field(*k, "top_k", "an integer >= 1");
    if (v < 1) invalid_value("top_k", cat("expected an integer >= 1, but got ", v, "."));
  }
}

void check_bookkeeping(const Json& body) {
  if (const Json* metadata = given(body, "metadata")) {
    if (!metadata->is_object()) invalid_type("metadata", "an object", *metadata);
    only_keys(*metadata, "metadata", {"user_id"});
    if (const Json* user = given(*metadata, "user_id")) {
      if (string_field(*user, "metadata.user_id").size() > 256)
        invalid_value("metadata.user_id", "expected at most 256 characters.");
    }
  }
  if (const Json* tier = given(body, "service_tier")) {
    const std::string& v = string_field(*tier, "service_tier");
    if (v != "auto" && v != "standard_only")
      invalid_value("service_tier", cat("expected \"auto\" or \"standard_only\", but got ", describe(*tier), "."));
  }
  if (const Json* speed = given(body, "speed")) {
    if (string_field(*speed, "speed") != "standard")
      unsupported("speed", cat("this server has one speed; expected \"standard\", but got ", describe(*speed), "."));
  }
  check_cache_control(body, "");
}

}  // namespace

MessagesRequest parse_messages_request(std::string_view body_text, const RequestLimits& limits, bool count_tokens) {
  const Json body = parse_body(body_text);
  check_known_fields(body, count_tokens);
  MessagesRequest out;
  Json chat = {{"model", served_model(body, limits)}};
  chat["messages"] = translate_messages(body);
  apply_context_management(body, chat["messages"]);
  const std::optional<int64_t> max_tokens = max_tokens_of(body, limits, count_tokens);
  if (max_tokens) chat["max_tokens"] = *max_tokens;
  const std::vector<std::string> stops = count_tokens ? std::vector<std::string>{} : stop_sequences(body);
  bool stream = false;
  if (const Json* s = given(body, "stream")) stream = bool_field(*s, "stream");
  translate_tools(body, chat);
  translate_tool_choice(body, chat);
  translate_thinking(body, max_tokens, chat, out);
  check_sampling(body);
  check_bookkeeping(body);
  const bool thinking = out.chat.thinking;
  try {
    out.chat = parse_request_json(Endpoint::Chat, std::move(chat), limits);
  } catch (const ApiError& e) {
    throw ApiError(e.status, cat("The request, translated to the chat form, was refused: ", e.what()), e.param, e.code, e.type);
  }
  out.chat.thinking = thinking;
  out.chat.stop = stops;
  out.chat.stream = stream;
  return out;
}

}  // namespace deltafin::api
