// Request validation for /v1/chat/completions and /v1/completions (request.h).
//
// Every check throws ApiError naming the field as a path; the messages say
// what was expected and what was given. The chat checks are a superset of what
// render_chat() (model/kimi_k3/chat/chat_template.cpp) rejects, so a request that passes
// here always renders: fuzz/request_fuzz.cpp aborts when one does not.
#include "server/api/request.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>

#include "server/api/json_fields.h"
#include "util/error.h"

namespace deltafin::api {
namespace {

using Json = nlohmann::ordered_json;
using namespace fields;

constexpr size_t kMaxStop = 4;

// ---------------------------------------------------------------------------
// Top level.

constexpr std::string_view kCommonFields[] = {
    "model", "max_tokens", "max_completion_tokens", "stop", "stream", "stream_options",
    "temperature", "top_p", "seed", "n", "user", "logprobs",
    "frequency_penalty", "presence_penalty", "logit_bias"};
constexpr std::string_view kChatFields[] = {
    "messages", "reasoning_effort", "tools", "tool_choice", "parallel_tool_calls", "response_format",
    "top_logprobs", "store", "metadata", "service_tier", "modalities"};
constexpr std::string_view kCompletionFields[] = {"prompt", "echo", "suffix", "best_of"};

void check_known_fields(const Json& body, Endpoint endpoint) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& key = it.key();
    const bool known = contains(kCommonFields, key) ||
                       (endpoint == Endpoint::Chat ? contains(kChatFields, key) : contains(kCompletionFields, key));
    if (!known) unknown(key);
  }
}

void check_model(const Json& body, const RequestLimits& limits, GenerationRequest& req) {
  req.model = served_model(body, limits);
}

std::optional<int64_t> token_limit(const Json& body, const char* key, const RequestLimits& limits) {
  const Json* v = given(body, key);
  if (!v) return std::nullopt;
  const std::string range = limits.max_tokens_ceiling > 0
                                ? cat("an integer from 1 to ", limits.max_tokens_ceiling, " (the server's --max-tokens)")
                                : std::string("an integer >= 1");
  const int64_t n = int64_field(*v, key, range);
  if (n < 1 || (limits.max_tokens_ceiling > 0 && n > limits.max_tokens_ceiling)) {
    invalid_value(key, cat("expected ", range, ", but got ", n, "."));
  }
  return n;
}

void check_max_tokens(const Json& body, const RequestLimits& limits, GenerationRequest& req) {
  const std::optional<int64_t> a = token_limit(body, "max_tokens", limits);
  const std::optional<int64_t> b = token_limit(body, "max_completion_tokens", limits);
  if (a && b && *a != *b) {
    invalid_value("max_completion_tokens",
                  cat("max_tokens (", *a, ") and max_completion_tokens (", *b,
                      ") disagree; they mean the same here, so give one of them (or equal values)."));
  }
  req.max_tokens = a ? a : b;
}

void check_stop(const Json& body, GenerationRequest& req) {
  const Json* stop = given(body, "stop");
  if (!stop) return;
  auto add = [&req](const Json& s, const std::string& path) {
    const std::string& text = string_field(s, path);
    if (text.empty()) invalid_value(path, "stop strings must not be empty.");
    req.stop.push_back(text);
  };
  if (stop->is_string()) {
    add(*stop, "stop");
    return;
  }
  if (!stop->is_array()) invalid_type("stop", "a string or an array of 1 to 4 strings", *stop);
  if (stop->empty() || stop->size() > kMaxStop) {
    invalid_value("stop", cat("expected an array of 1 to ", kMaxStop, " strings, but got ", stop->size(), "."));
  }
  for (size_t i = 0; i < stop->size(); ++i) add((*stop)[i], index("stop", i));
}

void check_stream(const Json& body, GenerationRequest& req) {
  if (const Json* stream = given(body, "stream")) req.stream = bool_field(*stream, "stream");
  const Json* options = given(body, "stream_options");
  if (!options) return;
  if (!options->is_object()) invalid_type("stream_options", "an object", *options);
  for (auto it = options->begin(); it != options->end(); ++it) {
    if (it.key() != "include_usage") unknown(join("stream_options", it.key()));
  }
  if (const Json* usage = given(*options, "include_usage")) {
    req.include_usage = bool_field(*usage, "stream_options.include_usage");
  }
  if (!req.stream) invalid_value("stream_options", "stream_options is only allowed when stream is true.");
}

void check_sampling(const Json& body, Endpoint endpoint, GenerationRequest& req) {
  if (const Json* t = given(body, "temperature")) {
    const double value = number_field(*t, "temperature", "a number from 0 to 2");
    if (!(value >= 0 && value <= 2)) invalid_value("temperature", cat("expected a number from 0 to 2, but got ", t->dump(), "."));
    if (value != 0) {
      unsupported("temperature",
                  cat("deltafin decodes greedily (the target model decides every token, and speculative drafts "
                      "are only kept where they agree with it), so temperature must be 0 or omitted; got ",
                      t->dump(), "."));
    }
  }
  if (const Json* p = given(body, "top_p")) {
    const double value = number_field(*p, "top_p", "a number in (0, 1]");
    if (!(value > 0 && value <= 1)) {
      invalid_value("top_p", cat("expected a number greater than 0 and at most 1, but got ", p->dump(), "."));
    }
  }
  if (const Json* seed = given(body, "seed")) req.seed = int64_field(*seed, "seed", "an integer");
  if (const Json* n = given(body, "n")) {
    const int64_t value = int64_field(*n, "n", "an integer");
    if (value < 1) invalid_value("n", cat("expected an integer >= 1, but got ", value, "."));
    if (value != 1) unsupported("n", cat("only n = 1 is supported (one choice per request); got ", value, "."));
  }
  if (const Json* user = given(body, "user")) req.user = string_field(*user, "user");
  if (const Json* logprobs = given(body, "logprobs")) {
    // Chat: a boolean. Legacy completions: an integer count of top logprobs.
    if (endpoint == Endpoint::Completion && logprobs->is_number_integer()) {
      unsupported("logprobs", cat("logprobs are not supported; got ", logprobs->dump(), "."));
    }
    if (!logprobs->is_boolean()) {
      invalid_type("logprobs", endpoint == Endpoint::Chat ? "a boolean" : "a boolean or an integer", *logprobs);
    }
    if (logprobs->get<bool>()) unsupported("logprobs", "logprobs are not supported.");
  }
}

// The standard parameters that would change how tokens are chosen, or ask
// for bookkeeping deltafin does not do, are accepted at their neutral values
// (what OpenAI does when they are absent) and refused otherwise: a client
// that sends `frequency_penalty: 0` asks for nothing, one that sends 0.5
// asks for something greedy decoding cannot give.
void check_neutral_parameters(const Json& body, Endpoint endpoint) {
  for (const char* key : {"frequency_penalty", "presence_penalty"}) {
    const Json* v = given(body, key);
    if (!v) continue;
    const double value = number_field(*v, key, "a number from -2 to 2");
    if (!(value >= -2 && value <= 2)) invalid_value(key, cat("expected a number from -2 to 2, but got ", v->dump(), "."));
    if (value != 0)
      unsupported(key, cat("deltafin decodes greedily (the target model decides every token), so ", key,
                           " must be 0 or omitted; got ", v->dump(), "."));
  }
  if (const Json* bias = given(body, "logit_bias")) {
    if (!bias->is_object()) invalid_type("logit_bias", "an object mapping token ids to biases", *bias);
    for (auto it = bias->begin(); it != bias->end(); ++it) {
      const std::string path = join("logit_bias", it.key());
      const double value = number_field(it.value(), path, "a number from -100 to 100");
      if (value != 0)
        unsupported(path, cat("logit_bias changes which token is chosen; only an empty object (or biases of 0) is "
                              "accepted; got ", it.value().dump(), "."));
    }
  }
  if (endpoint != Endpoint::Chat) return;
  if (const Json* top = given(body, "top_logprobs")) {
    const int64_t value = int64_field(*top, "top_logprobs", "an integer from 0 to 20");
    if (value < 0 || value > 20) invalid_value("top_logprobs", cat("expected an integer from 0 to 20, but got ", value, "."));
    if (value != 0) unsupported("top_logprobs", "logprobs are not supported, so top_logprobs must be 0 or omitted.");
  }
  if (const Json* store = given(body, "store")) {
    if (bool_field(*store, "store")) unsupported("store", "deltafin keeps no stored completions; store must be false or omitted.");
  }
  if (const Json* metadata = given(body, "metadata")) {  // bookkeeping only: accepted and ignored
    if (!metadata->is_object()) invalid_type("metadata", "an object of string values", *metadata);
    if (metadata->size() > 16) invalid_value("metadata", cat("expected at most 16 keys, but got ", metadata->size(), "."));
    for (auto it = metadata->begin(); it != metadata->end(); ++it) {
      const std::string path = join("metadata", it.key());
      if (it.key().size() > 64) invalid_value(path, "metadata keys are at most 64 characters.");
      if (string_field(it.value(), path).size() > 512) invalid_value(path, "metadata values are at most 512 characters.");
    }
  }
  if (const Json* tier = given(body, "service_tier")) {
    const std::string& value = string_field(*tier, "service_tier");
    if (value != "auto" && value != "default")
      unsupported("service_tier", cat("this server has one tier; expected \"auto\" or \"default\", but got ",
                                      describe(*tier), "."));
  }
  if (const Json* modalities = given(body, "modalities")) {
    if (!modalities->is_array()) invalid_type("modalities", "an array of strings", *modalities);
    for (size_t i = 0; i < modalities->size(); ++i)
      if (string_field((*modalities)[i], index("modalities", i)) != "text")
        unsupported(index("modalities", i), "only text output is supported.");
  }
}

// ---------------------------------------------------------------------------
// Chat messages.

// "developer" is OpenAI's successor of "system" for reasoning models; it is
// rendered as a system message (parse_request rewrites the role).
constexpr std::string_view kRoles[] = {"system", "developer", "user", "assistant", "tool"};

bool allowed_message_key(std::string_view role, std::string_view key) {
  if (key == "role" || key == "content" || key == "name") return true;
  if (role == "assistant") return key == "tool_calls" || key == "reasoning_content" || key == "reasoning";
  if (role == "tool") return key == "tool_call_id" || key == "tool";
  return false;
}

const std::string& role_of(const Json& message) { return message.find("role")->get_ref<const std::string&>(); }

// §9.3 arguments, as render_chat reads them: an object, or a string. A string
// that is JSON must hold an object; one that is not JSON is passed verbatim.
void check_arguments(const Json* args, const std::string& path) {
  if (!args) missing(path);
  if (args->is_object()) return;
  if (!args->is_string()) invalid_type(path, "a string (JSON-encoded object) or an object", *args);
  Json parsed;
  try {
    parsed = parse_json(args->get_ref<const std::string&>(), /*allow_exceptions=*/false);
  } catch (const TooDeep&) {
    invalid_value(path, cat("the arguments string nests JSON arrays/objects more than ", kMaxNesting,
                            " levels deep."));
  }
  if (parsed.is_discarded()) return;
  if (!parsed.is_object()) {
    invalid_value(path, cat("the arguments string is JSON but not a JSON object (it holds ", describe(parsed), ")."));
  }
}

// Returns the number of calls (0 when tool_calls is absent, null or []).
size_t check_tool_calls(const Json& message, const std::string& path) {
  const Json* calls = given(message, "tool_calls");
  const std::string field = join(path, "tool_calls");
  if (!calls) return 0;
  if (!calls->is_array()) invalid_type(field, "an array of tool calls", *calls);
  for (size_t k = 0; k < calls->size(); ++k) {
    const Json& call = (*calls)[k];
    const std::string call_path = index(field, k);
    if (!call.is_object()) invalid_type(call_path, "a tool call object", call);
    for (auto it = call.begin(); it != call.end(); ++it) {
      if (it.key() != "id" && it.key() != "type" && it.key() != "function") unknown(join(call_path, it.key()));
    }
    if (const Json* id = given(call, "id")) string_field(*id, join(call_path, "id"));
    if (const Json* type = given(call, "type")) {
      if (string_field(*type, join(call_path, "type")) != "function") {
        invalid_value(join(call_path, "type"), cat("expected \"function\", but got ", describe(*type), "."));
      }
    }
    const std::string function_path = join(call_path, "function");
    const Json* function = given(call, "function");
    if (!function) missing(function_path);
    if (!function->is_object()) invalid_type(function_path, "an object", *function);
    for (auto it = function->begin(); it != function->end(); ++it) {
      if (it.key() != "name" && it.key() != "arguments") unknown(join(function_path, it.key()));
    }
    const std::string name_path = join(function_path, "name");
    const Json* name = given(*function, "name");
    if (!name) missing(name_path);
    if (string_field(*name, name_path).empty()) invalid_value(name_path, "the function name must not be empty.");
    check_arguments(present(*function, "arguments"), join(function_path, "arguments"));
  }
  return calls->size();
}

// content: a string, or an array of text parts; null only where allowed.
void check_content(const Json& message, const std::string& path, const std::string& role, size_t tool_calls) {
  const std::string field = join(path, "content");
  const Json* content = present(message, "content");
  if (!content || content->is_null()) {
    if (role == "assistant" && tool_calls > 0) return;
    const char* why = role == "assistant" ? "an assistant message needs content unless it has tool_calls"
                                          : "only an assistant message with tool_calls may omit content";
    if (!content) missing(field, why);
    invalid_type(field, cat("a string or an array of text parts (", why, ")"), *content);
  }
  if (content->is_string()) return;
  if (!content->is_array()) invalid_type(field, "a string or an array of text parts", *content);
  for (size_t j = 0; j < content->size(); ++j) {
    const Json& part = (*content)[j];
    const std::string part_path = index(field, j);
    if (!part.is_object()) invalid_type(part_path, "a content part object", part);
    const std::string type_path = join(part_path, "type");
    const Json* type = given(part, "type");
    if (!type) missing(type_path);
    const std::string& t = string_field(*type, type_path);
    if (t != "text") {
      unsupported(type_path, cat("only text content parts are supported (no vision or audio tower runs); got ",
                                 describe(*type), "."));
    }
    for (auto it = part.begin(); it != part.end(); ++it) {
      if (it.key() != "type" && it.key() != "text") unknown(join(part_path, it.key()));
    }
    const std::string text_path = join(part_path, "text");
    const Json* text = given(part, "text");
    if (!text) missing(text_path);
    string_field(*text, text_path);
  }
}

void check_message(const Json& message, const std::string& path) {
  if (!message.is_object()) invalid_type(path, "a message object", message);
  const std::string role_path = join(path, "role");
  const Json* role_value = given(message, "role");
  if (!role_value) missing(role_path);
  const std::string& role = string_field(*role_value, role_path);
  if (!contains(kRoles, role)) {
    invalid_value(role_path, cat("expected one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\", but got ",
                                 describe(*role_value), "."));
  }
  for (auto it = message.begin(); it != message.end(); ++it) {
    if (!allowed_message_key(role, it.key())) unknown(join(path, it.key()));
  }
  if (const Json* name = given(message, "name")) string_field(*name, join(path, "name"));
  size_t calls = 0;
  if (role == "assistant") {
    calls = check_tool_calls(message, path);
    for (const char* key : {"reasoning_content", "reasoning"}) {
      if (const Json* r = given(message, key)) string_field(*r, join(path, key));
    }
  }
  if (role == "tool") {
    for (const char* key : {"tool_call_id", "tool"}) {
      if (const Json* v = given(message, key)) string_field(*v, join(path, key));
    }
  }
  check_content(message, path, role, calls);
}

bool non_empty_string(const Json& object, const char* key) {
  const Json* v = given(object, key);
  return v && !v->get_ref<const std::string&>().empty();
}

// Every tool message must get a tool name when rendered (chat_template.cpp,
// chat_tools.cpp tool_message_name/order_tool_run): a run of tool messages
// directly after an assistant message whose tool_call_ids all match its calls'
// ids takes the calls' names; otherwise each tool message needs a non-empty
// `tool` or `name`, or the latest assistant message must have a call at its
// position (counting tool messages since that assistant message).
void check_tool_names(const Json& messages) {
  std::vector<const std::string*> call_ids;  // of the latest assistant message; nullptr: call without id
  size_t since_assistant = 0;
  auto check = [&](size_t k) {
    const Json& m = messages[k];
    ++since_assistant;
    if (non_empty_string(m, "tool") || non_empty_string(m, "name") || since_assistant <= call_ids.size()) return;
    const std::string path = index("messages", k);
    invalid_value(path, cat("cannot tell which tool this tool message answers: it has no 'name', its "
                            "'tool_call_id' does not match the tool calls of the preceding assistant message, "
                            "and that message has no tool call #", since_assistant, " to take the name from."));
  };
  size_t i = 0;
  while (i < messages.size()) {
    const Json& m = messages[i];
    const std::string& role = role_of(m);
    ++i;
    if (role == "tool") {
      check(i - 1);
      continue;
    }
    if (role != "assistant") continue;
    call_ids.clear();
    since_assistant = 0;
    if (const Json* calls = given(m, "tool_calls")) {
      for (const Json& call : *calls) {
        const Json* id = given(call, "id");
        call_ids.push_back(id ? &id->get_ref<const std::string&>() : nullptr);
      }
    }
    size_t end = i;
    while (end < messages.size() && role_of(messages[end]) == "tool") ++end;
    bool all_matched = true;
    for (size_t k = i; k < end && all_matched; ++k) {
      const Json* id = given(messages[k], "tool_call_id");
      all_matched = id && std::any_of(call_ids.begin(), call_ids.end(), [id](const std::string* c) {
                      return c && *c == id->get_ref<const std::string&>();
                    });
    }
    if (all_matched) {
      since_assistant += end - i;
    } else {
      for (size_t k = i; k < end; ++k) check(k);
    }
    i = end;
  }
}

void check_messages(const Json& body) {
  const Json* messages = given(body, "messages");
  if (!messages) missing("messages");
  if (!messages->is_array()) invalid_type("messages", "an array of message objects", *messages);
  if (messages->empty()) invalid_value("messages", "expected at least one message, but got an empty array.");
  for (size_t i = 0; i < messages->size(); ++i) check_message((*messages)[i], index("messages", i));
  check_tool_names(*messages);
}

// ---------------------------------------------------------------------------
// Tools and response formats.

constexpr size_t kMaxTools = 128;  // OpenAI's limit

// OpenAI's rule for function and schema names: 1..64 of a-z, A-Z, 0-9, _ and -.
void check_name(const Json& v, const std::string& path, std::string_view what) {
  const std::string& name = string_field(v, path);
  const bool ok = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (!ok) {
    invalid_value(path, cat(what, " must be 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-', but got ", describe(v), "."));
  }
}

void check_tool(const Json& tool, const std::string& path) {
  if (!tool.is_object()) invalid_type(path, "a tool object", tool);
  only_keys(tool, path, {"type", "function"});
  const Json* type = given(tool, "type");
  if (!type) missing(join(path, "type"));
  if (string_field(*type, join(path, "type")) != "function") {
    unsupported(join(path, "type"), cat("only function tools are supported; got ", describe(*type), "."));
  }
  const std::string function_path = join(path, "function");
  const Json* function = given(tool, "function");
  if (!function) missing(function_path);
  if (!function->is_object()) invalid_type(function_path, "an object", *function);
  only_keys(*function, function_path, {"name", "description", "parameters", "strict"});
  const Json* name = given(*function, "name");
  if (!name) missing(join(function_path, "name"));
  check_name(*name, join(function_path, "name"), "a function name");
  if (const Json* d = given(*function, "description")) string_field(*d, join(function_path, "description"));
  if (const Json* p = given(*function, "parameters")) {
    if (!p->is_object()) invalid_type(join(function_path, "parameters"), "a JSON Schema object", *p);
  }
  if (const Json* strict = given(*function, "strict")) bool_field(*strict, join(function_path, "strict"));
}

void check_tools(const Json& body, GenerationRequest& req) {
  const Json* tools = given(body, "tools");
  if (!tools) return;
  if (!tools->is_array()) invalid_type("tools", "an array of tools", *tools);
  if (tools->empty() || tools->size() > kMaxTools) {
    invalid_value("tools", cat("expected 1 to ", kMaxTools, " tools, but got ", tools->size(), " (leave tools out for none)."));
  }
  for (size_t i = 0; i < tools->size(); ++i) {
    check_tool((*tools)[i], index("tools", i));
    const std::string& name = (*tools)[i]["function"]["name"].get_ref<const std::string&>();
    for (size_t j = 0; j < i; ++j) {
      if ((*tools)[j]["function"]["name"] == name) {
        invalid_value(index("tools", i), cat("the function name '", clip(name), "' is declared twice (also tools[", j, "])."));
      }
    }
  }
  req.tools = *tools;
}

void check_tool_choice(const Json& body, GenerationRequest& req) {
  const Json* choice = given(body, "tool_choice");
  if (!choice) return;
  const bool has_tools = !req.tools.is_null();
  if (choice->is_string()) {
    const std::string& value = choice->get_ref<const std::string&>();
    if (value != "none" && value != "auto" && value != "required") {
      invalid_value("tool_choice", cat("expected \"none\", \"auto\", \"required\" or a named function, but got ",
                                       describe(*choice), "."));
    }
    if (value == "required" && !has_tools) invalid_value("tool_choice", "\"required\" needs tools to choose from.");
    req.tool_choice = *choice;
    return;
  }
  if (!choice->is_object()) invalid_type("tool_choice", "a string or {\"type\": \"function\", \"function\": {\"name\"}}", *choice);
  only_keys(*choice, "tool_choice", {"type", "function"});
  const Json* type = given(*choice, "type");
  if (!type) missing("tool_choice.type");
  if (string_field(*type, "tool_choice.type") != "function") {
    unsupported("tool_choice.type", cat("only \"function\" is supported; got ", describe(*type), "."));
  }
  const Json* function = given(*choice, "function");
  if (!function) missing("tool_choice.function");
  if (!function->is_object()) invalid_type("tool_choice.function", "an object", *function);
  only_keys(*function, "tool_choice.function", {"name"});
  const Json* name = given(*function, "name");
  if (!name) missing("tool_choice.function.name");
  const std::string& wanted = string_field(*name, "tool_choice.function.name");
  const bool declared = has_tools && std::any_of(req.tools.begin(), req.tools.end(), [&](const Json& t) {
                          return t["function"]["name"] == wanted;
                        });
  if (!declared) {
    invalid_value("tool_choice.function.name", cat("'", clip(wanted), "' is not one of the functions in tools."));
  }
  req.tool_choice = *choice;
}

void check_response_format(const Json& body, GenerationRequest& req) {
  const Json* format = given(body, "response_format");
  if (!format) return;
  if (!format->is_object()) invalid_type("response_format", "an object", *format);
  const Json* type = given(*format, "type");
  if (!type) missing("response_format.type");
  const std::string& t = string_field(*type, "response_format.type");
  if (t == "text" || t == "json_object") {
    only_keys(*format, "response_format", {"type"});
  } else if (t == "json_schema") {
    only_keys(*format, "response_format", {"type", "json_schema"});
    const Json* schema = given(*format, "json_schema");
    if (!schema) missing("response_format.json_schema");
    if (!schema->is_object()) invalid_type("response_format.json_schema", "an object", *schema);
    only_keys(*schema, "response_format.json_schema", {"name", "description", "schema", "strict"});
    const Json* name = given(*schema, "name");
    if (!name) missing("response_format.json_schema.name");
    check_name(*name, "response_format.json_schema.name", "a schema name");
    if (const Json* d = given(*schema, "description")) string_field(*d, "response_format.json_schema.description");
    if (const Json* s = given(*schema, "schema")) {
      if (!s->is_object()) invalid_type("response_format.json_schema.schema", "a JSON Schema object", *s);
    }
    if (const Json* strict = given(*schema, "strict")) bool_field(*strict, "response_format.json_schema.strict");
  } else {
    invalid_value("response_format.type",
                  cat("expected \"text\", \"json_object\" or \"json_schema\", but got ", describe(*type), "."));
  }
  if (t != "text") req.response_format = *format;
}

void check_chat_options(const Json& body, GenerationRequest& req) {
  if (const Json* effort = given(body, "reasoning_effort")) {
    const std::string& value = string_field(*effort, "reasoning_effort");
    if (value != "minimal" && value != "low" && value != "medium" && value != "high" && value != "max") {
      invalid_value("reasoning_effort", cat("expected \"minimal\", \"low\", \"medium\", \"high\" or \"max\", but got ",
                                            describe(*effort), "."));
    }
    req.reasoning_effort = value;
  }
  check_tools(body, req);
  check_tool_choice(body, req);
  if (const Json* parallel = given(body, "parallel_tool_calls")) req.parallel_tool_calls = bool_field(*parallel, "parallel_tool_calls");
  check_response_format(body, req);
}

// ---------------------------------------------------------------------------
// Completions.

void check_prompt(const Json& body, const RequestLimits& limits, GenerationRequest& req) {
  const Json* prompt = given(body, "prompt");
  if (!prompt) missing("prompt");
  if (prompt->is_string()) {
    if (prompt->get_ref<const std::string&>().empty()) invalid_value("prompt", "the prompt must not be empty.");
    req.prompt_text = prompt->get<std::string>();
    return;
  }
  if (!prompt->is_array()) invalid_type("prompt", "a string or an array of token ids", *prompt);
  if (prompt->empty()) invalid_value("prompt", "the prompt must not be empty.");
  for (const Json& item : *prompt) {
    if (item.is_string() || item.is_array()) {
      unsupported("prompt", "batched prompts are not supported; send one prompt per request.");
    }
  }
  req.prompt_ids.reserve(prompt->size());
  for (size_t i = 0; i < prompt->size(); ++i) {
    const Json& id = (*prompt)[i];
    const std::string path = index("prompt", i);
    const std::string range = cat("an integer token id from 0 to ", int64_t{limits.vocab_size} - 1);
    if (!id.is_number_integer()) invalid_type(path, range, id);
    if (id.is_number_integer() && !id.is_number_unsigned()) {  // negative
      invalid_value(path, cat("expected ", range, " (the vocabulary has ", limits.vocab_size, " tokens), but got ",
                              id.dump(), "."));
    }
    const uint64_t value = id.get<uint64_t>();
    if (value >= limits.vocab_size) {
      invalid_value(path, cat("expected ", range, " (the vocabulary has ", limits.vocab_size, " tokens), but got ",
                              value, "."));
    }
    req.prompt_ids.push_back(static_cast<uint32_t>(value));
  }
}

void check_completion_options(const Json& body) {
  if (const Json* echo = given(body, "echo")) {
    if (bool_field(*echo, "echo")) unsupported("echo", "echo is not supported.");
  }
  if (given(body, "suffix")) unsupported("suffix", "suffix (insertion) is not supported.");
  if (const Json* best_of = given(body, "best_of")) {
    const int64_t value = int64_field(*best_of, "best_of", "an integer");
    if (value < 1) invalid_value("best_of", cat("expected an integer >= 1, but got ", value, "."));
    if (value != 1) unsupported("best_of", cat("only best_of = 1 is supported; got ", value, "."));
  }
}

}  // namespace

std::string served_model(const nlohmann::ordered_json& body, const RequestLimits& limits) {
  const Json* model = given(body, "model");
  if (!model) missing("model");
  const std::string& name = string_field(*model, "model");
  if (contains(limits.model_ids, name)) return name;
  std::string served;
  for (const std::string& id : limits.model_ids) served += (served.empty() ? "" : ", ") + id;
  throw ApiError(404,
                 cat("The model '", clip(name), "' does not exist; this server serves: ",
                     served.empty() ? "(none)" : served),
                 "model", "model_not_found", "not_found_error");
}

GenerationRequest parse_request(Endpoint endpoint, std::string_view body_text, const RequestLimits& limits) {
  return parse_request_json(endpoint, parse_body(body_text), limits);
}

GenerationRequest parse_request_json(Endpoint endpoint, nlohmann::ordered_json body, const RequestLimits& limits) {
  GenerationRequest req;
  req.endpoint = endpoint;
  check_known_fields(body, endpoint);
  check_model(body, limits, req);
  if (endpoint == Endpoint::Chat) {
    check_messages(body);
    check_chat_options(body, req);
  } else {
    check_prompt(body, limits, req);
    check_completion_options(body);
  }
  check_max_tokens(body, limits, req);
  check_stop(body, req);
  check_stream(body, req);
  check_sampling(body, endpoint, req);
  check_neutral_parameters(body, endpoint);
  if (endpoint == Endpoint::Chat) {
    req.messages = std::move(*body.find("messages"));
    for (Json& m : req.messages)
      if (role_of(m) == "developer") m["role"] = "system";
  }
  return req;
}

}  // namespace deltafin::api
