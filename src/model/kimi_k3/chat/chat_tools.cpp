// Decisions where §9.3 is silent (summarised in chat_template.cpp too):
// - A tool call needs a `function` object with a non-empty string `name`.
// - Arguments given as JSON values are rendered with Jinja's tojson
//   (json.dumps, ensure_ascii=False): non-ASCII stays UTF-8, keys keep their
//   order. Arguments that are neither null, object nor string are an error.
// - Call ids and message ids are compared as JSON values (null never
//   matches); several messages naming one call keep their order.
#include "model/kimi_k3/chat/chat_tools.h"

#include <algorithm>
#include <utility>

#include "tokenizer/python_format.h"
#include "util/error.h"

namespace deltafin {
namespace {

using Json = nlohmann::ordered_json;

// The field, or nullptr when the key is absent.
const Json* find_field(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const char* kind(const Json* v) { return v ? v->type_name() : "nothing"; }

// The Python type name of an argument value, as §9.3 spells it.
const char* argument_type(const Json& v) {
  switch (v.type()) {
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::null: return "null";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "number";
    case Json::value_t::string: return "string";
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    default: fail("cannot render a JSON ", v.type_name(), " argument value");
  }
}

void add_argument_blocks(const Json& object, ToolCall& call) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    const Json& value = it.value();
    const char* type = argument_type(value);
    call.arguments.push_back(
        {it.key(), type, value.is_string() ? value.get<std::string>() : python_json_dumps(value, kJsonPythonDefault)});
  }
}

// §9.3 arguments: null, a JSON object, or a string holding one. A blank string
// gives nothing; an unparsable one is kept verbatim for the model to see.
void read_arguments(const Json* args, const std::string& field, ToolCall& call) {
  if (!args || args->is_null()) return;
  if (args->is_object()) {
    add_argument_blocks(*args, call);
    return;
  }
  if (!args->is_string()) fail(field, ": expected object, JSON string or null, got ", args->type_name());
  const std::string& raw = args->get_ref<const std::string&>();
  if (python_is_blank(raw)) return;
  const Json parsed = Json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    call.unparsed_arguments = raw;
    return;
  }
  if (!parsed.is_object()) {
    fail(field, ": the string parses as a JSON ", parsed.type_name(), ", expected an object");
  }
  add_argument_blocks(parsed, call);
}

}  // namespace

std::vector<ToolCall> read_tool_calls(const Json& message, const std::string& path) {
  std::vector<ToolCall> calls;
  const Json* list = find_field(message, "tool_calls");
  if (!list || list->is_null()) return calls;
  if (!list->is_array()) fail(path, ".tool_calls: expected array or null, got ", list->type_name());
  for (size_t k = 0; k < list->size(); ++k) {
    const Json& entry = (*list)[k];
    const std::string call_path = cat(path, ".tool_calls[", k, "]");
    if (!entry.is_object()) fail(call_path, ": expected object, got ", entry.type_name());
    const Json* function = find_field(entry, "function");
    if (!function || !function->is_object()) {
      fail(call_path, ".function: expected object, got ", kind(function));
    }
    const Json* name = find_field(*function, "name");
    if (!name || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      fail(call_path, ".function.name: expected non-empty string, got ",
           name && name->is_string() ? "empty string" : kind(name));
    }
    ToolCall call{find_field(entry, "id"), name->get_ref<const std::string&>(), {}, std::nullopt};
    read_arguments(find_field(*function, "arguments"), call_path + ".function.arguments", call);
    calls.push_back(std::move(call));
  }
  return calls;
}

std::vector<ToolTurn> order_tool_run(const Json& messages, size_t begin, size_t end,
                                     const std::vector<ToolCall>& calls) {
  std::vector<ToolTurn> as_written;
  for (size_t k = begin; k < end; ++k) as_written.push_back({k, std::nullopt});
  std::vector<std::pair<size_t, size_t>> matched;  // (call position, message index)
  for (size_t k = begin; k < end; ++k) {
    const Json* id = find_field(messages[k], "tool_call_id");
    if (!id || id->is_null()) id = find_field(messages[k], "id");
    if (!id || id->is_null()) return as_written;
    size_t position = calls.size();
    for (size_t c = 0; c < calls.size(); ++c) {
      if (calls[c].id && *calls[c].id == *id) {
        position = c;
        break;
      }
    }
    if (position == calls.size()) return as_written;
    matched.emplace_back(position, k);
  }
  std::stable_sort(matched.begin(), matched.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ToolTurn> reordered;
  for (const auto& [position, k] : matched) reordered.push_back({k, calls[position].function_name});
  return reordered;
}

std::string tool_message_name(const Json& message, const std::string& path,
                              const std::optional<std::string>& assigned_name, size_t index,
                              const std::vector<ToolCall>& calls) {
  if (assigned_name) return *assigned_name;
  const Json* tool_field = find_field(message, "tool");
  if (tool_field && python_truthy(*tool_field)) return python_str(*tool_field, path + ".tool");
  const Json* name_field = find_field(message, "name");
  if (name_field && python_truthy(*name_field)) return python_str(*name_field, path + ".name");
  if (index >= 1 && index <= calls.size()) return calls[index - 1].function_name;
  fail(path, ": tool message has no \"tool\" or \"name\", and the preceding assistant message has no call #",
       index, " to take the name from");
}

}  // namespace deltafin
