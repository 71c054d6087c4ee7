// Request validation (server/api/request.h): one table of bodies that must be
// refused (status, param, code and a piece of the message) and good bodies
// with the fields they parse to. Accepted chat bodies are also rendered, since
// validation promises that every accepted request renders.
#include "server/api/request.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "model/kimi_k3/chat/chat_template.h"

namespace deltafin::api {
namespace {

using Json = nlohmann::ordered_json;

RequestLimits limits() { return {{"k3", "k3-mini"}, 1000, 100}; }

// A chat body with one user message plus `extra` fields ("" for none).
std::string chat(const std::string& extra = "") {
  return R"({"model":"k3","messages":[{"role":"user","content":"hi"}])" + (extra.empty() ? "" : "," + extra) + "}";
}
// A chat body with the given messages array.
std::string msgs(const std::string& messages) { return R"({"model":"k3","messages":)" + messages + "}"; }
// A completion body with a text prompt plus `extra` fields.
std::string comp(const std::string& extra = "") {
  return R"({"model":"k3","prompt":"Once")" + (extra.empty() ? "" : "," + extra) + "}";
}
std::string prompt(const std::string& value) { return R"({"model":"k3","prompt":)" + value + "}"; }
// An assistant message with one tool call whose fields are `call` (a JSON object body).
std::string call(const std::string& call_fields) {
  return msgs(R"([{"role":"assistant","content":null,"tool_calls":[{)" + call_fields + "}]}]");
}

constexpr Endpoint C = Endpoint::Chat;
constexpr Endpoint P = Endpoint::Completion;

struct Bad {
  const char* what;
  Endpoint endpoint;
  std::string body;
  int status;
  std::string param;
  std::string code;
  std::string needle;  // part of the message
};

std::vector<Bad> bad_cases() {
  return {
      // Body.
      {"truncated JSON", C, R"({"model": "k3",)", 400, "", "invalid_json", "at byte 16"},
      {"empty body", C, "", 400, "", "invalid_json", "not valid JSON"},
      {"trailing garbage", C, "{} x", 400, "", "invalid_json", "at byte"},
      {"invalid UTF-8", C, "{\"model\":\"k3\xff\"}", 400, "", "invalid_json", "UTF-8"},
      {"lone surrogate escape", C, R"({"model":"\ud800"})", 400, "", "invalid_json", "surrogate"},
      {"number overflow", C, chat(R"("max_tokens":1e999)"), 400, "", "invalid_json", "number overflow"},
      {"array body", C, "[1]", 400, "", "invalid_type", "must be a JSON object, but got an array"},
      {"string body", P, R"("hi")", 400, "", "invalid_type", "must be a JSON object"},
      {"null body", C, "null", 400, "", "invalid_type", "but got null"},
      // Fields: known lists, per endpoint.
      {"unknown field", C, chat(R"("foo":1)"), 400, "foo", "unknown_field", "Unrecognized request argument supplied: foo"},
      {"unknown field null", C, chat(R"("best_of_n":null)"), 400, "best_of_n", "unknown_field", "best_of_n"},
      // Standard parameters at non-neutral values: refused naming the field.
      {"frequency_penalty", C, chat(R"("frequency_penalty":0.5)"), 400, "frequency_penalty", "unsupported_value",
       "frequency_penalty must be 0 or omitted"},
      {"presence_penalty", P, comp(R"("presence_penalty":-1)"), 400, "presence_penalty", "unsupported_value",
       "presence_penalty must be 0 or omitted"},
      {"presence_penalty out of range", C, chat(R"("presence_penalty":3)"), 400, "presence_penalty", "invalid_value",
       "from -2 to 2"},
      {"frequency_penalty string", C, chat(R"("frequency_penalty":"0")"), 400, "frequency_penalty", "invalid_type", ""},
      {"logit_bias", C, chat(R"("logit_bias":{"50256":-100})"), 400, "logit_bias.50256", "unsupported_value",
       "only an empty object"},
      {"logit_bias array", P, comp(R"("logit_bias":[])"), 400, "logit_bias", "invalid_type", ""},
      {"store true", C, chat(R"("store":true)"), 400, "store", "unsupported_value", "store must be false"},
      {"store on completion", P, comp(R"("store":false)"), 400, "store", "unknown_field", ""},
      {"metadata number", C, chat(R"("metadata":{"a":1})"), 400, "metadata.a", "invalid_type", "a string"},
      {"top_logprobs", C, chat(R"("top_logprobs":3)"), 400, "top_logprobs", "unsupported_value", "top_logprobs must be 0"},
      {"service_tier flex", C, chat(R"("service_tier":"flex")"), 400, "service_tier", "unsupported_value", "one tier"},
      {"modalities audio", C, chat(R"("modalities":["text","audio"])"), 400, "modalities[1]", "unsupported_value", ""},
      {"prompt on chat", C, chat(R"("prompt":"x")"), 400, "prompt", "unknown_field", "supplied: prompt"},
      {"echo on chat", C, chat(R"("echo":false)"), 400, "echo", "unknown_field", "echo"},
      {"messages on completion", P, comp(R"("messages":[])"), 400, "messages", "unknown_field", "messages"},
      {"reasoning_effort on completion", P, comp(R"("reasoning_effort":"low")"), 400, "reasoning_effort", "unknown_field", ""},
      {"tools on completion", P, comp(R"("tools":[])"), 400, "tools", "unknown_field", ""},
      // model.
      {"missing model", C, R"({"messages":[{"role":"user","content":"hi"}]})", 400, "model", "missing_required_parameter", "'model'"},
      {"null model", P, R"({"model":null,"prompt":"x"})", 400, "model", "missing_required_parameter", "'model'"},
      {"model not a string", C, R"({"model":5,"messages":[]})", 400, "model", "invalid_type", "expected a string, but got an integer (5)"},
      {"unknown model", C, R"({"model":"gpt-4","messages":[{"role":"user","content":"hi"}]})", 404, "model", "model_not_found",
       "The model 'gpt-4' does not exist; this server serves: k3, k3-mini"},
      // max_tokens / max_completion_tokens.
      {"max_tokens 0", C, chat(R"("max_tokens":0)"), 400, "max_tokens", "invalid_value", "from 1 to 1000 (the server's --max-tokens), but got 0"},
      {"max_tokens -1", C, chat(R"("max_tokens":-1)"), 400, "max_tokens", "invalid_value", "got -1"},
      {"max_tokens 1.5", C, chat(R"("max_tokens":1.5)"), 400, "max_tokens", "invalid_type", "got a number (1.5)"},
      {"max_tokens 16.0", P, comp(R"("max_tokens":16.0)"), 400, "max_tokens", "invalid_type", "16.0"},
      {"max_tokens string", C, chat(R"("max_tokens":"16")"), 400, "max_tokens", "invalid_type", R"(got a string ("16"))"},
      {"max_tokens bool", C, chat(R"("max_tokens":true)"), 400, "max_tokens", "invalid_type", "a boolean (true)"},
      {"max_tokens over ceiling", C, chat(R"("max_tokens":1001)"), 400, "max_tokens", "invalid_value", "from 1 to 1000"},
      {"max_tokens above int64", C, chat(R"("max_tokens":18446744073709551615)"), 400, "max_tokens", "invalid_value", "2^63"},
      {"max_completion_tokens 0", C, chat(R"("max_completion_tokens":0)"), 400, "max_completion_tokens", "invalid_value", "got 0"},
      {"max tokens fields differ", C, chat(R"("max_tokens":10,"max_completion_tokens":20)"), 400, "max_completion_tokens",
       "invalid_value", "max_tokens (10) and max_completion_tokens (20) disagree"},
      // stop.
      {"stop 5 strings", C, chat(R"("stop":["a","b","c","d","e"])"), 400, "stop", "invalid_value", "1 to 4 strings, but got 5"},
      {"stop empty array", C, chat(R"("stop":[])"), 400, "stop", "invalid_value", "but got 0"},
      {"stop empty string", P, comp(R"("stop":"")"), 400, "stop", "invalid_value", "must not be empty"},
      {"stop empty string in array", C, chat(R"("stop":["a",""])"), 400, "stop[1]", "invalid_value", "must not be empty"},
      {"stop non-string in array", C, chat(R"("stop":["a",1])"), 400, "stop[1]", "invalid_type", "expected a string"},
      {"stop number", C, chat(R"("stop":7)"), 400, "stop", "invalid_type", "a string or an array of 1 to 4 strings"},
      // stream / stream_options.
      {"stream string", C, chat(R"("stream":"true")"), 400, "stream", "invalid_type", "expected a boolean"},
      {"stream number", P, comp(R"("stream":1)"), 400, "stream", "invalid_type", "expected a boolean"},
      {"stream_options without stream", C, chat(R"("stream_options":{"include_usage":true})"), 400, "stream_options",
       "invalid_value", "stream_options is only allowed when stream is true"},
      {"stream_options with stream false", P, comp(R"("stream":false,"stream_options":{})"), 400, "stream_options",
       "invalid_value", "only allowed when stream is true"},
      {"stream_options unknown key", C, chat(R"("stream":true,"stream_options":{"foo":1})"), 400, "stream_options.foo",
       "unknown_field", "stream_options.foo"},
      {"stream_options not object", C, chat(R"("stream":true,"stream_options":[])"), 400, "stream_options", "invalid_type", "an object"},
      {"include_usage not bool", C, chat(R"("stream":true,"stream_options":{"include_usage":"yes"})"), 400,
       "stream_options.include_usage", "invalid_type", "expected a boolean"},
      // temperature / top_p.
      {"temperature 0.7", C, chat(R"("temperature":0.7)"), 400, "temperature", "unsupported_value", "decodes greedily"},
      {"temperature 2", P, comp(R"("temperature":2)"), 400, "temperature", "unsupported_value", "must be 0 or omitted"},
      {"temperature 3", C, chat(R"("temperature":3)"), 400, "temperature", "invalid_value", "from 0 to 2, but got 3"},
      {"temperature negative", C, chat(R"("temperature":-0.5)"), 400, "temperature", "invalid_value", "got -0.5"},
      {"temperature string", C, chat(R"("temperature":"0")"), 400, "temperature", "invalid_type", R"(a string ("0"))"},
      {"temperature bool", C, chat(R"("temperature":false)"), 400, "temperature", "invalid_type", "a boolean"},
      {"top_p 0", C, chat(R"("top_p":0)"), 400, "top_p", "invalid_value", "greater than 0 and at most 1, but got 0"},
      {"top_p 1.5", P, comp(R"("top_p":1.5)"), 400, "top_p", "invalid_value", "got 1.5"},
      {"top_p string", C, chat(R"("top_p":"0.9")"), 400, "top_p", "invalid_type", "expected a number"},
      // seed, n, user, logprobs.
      {"seed float", C, chat(R"("seed":1.5)"), 400, "seed", "invalid_type", "expected an integer"},
      {"seed string", C, chat(R"("seed":"1")"), 400, "seed", "invalid_type", "expected an integer"},
      {"seed above int64", C, chat(R"("seed":9223372036854775808)"), 400, "seed", "invalid_value", "2^63"},
      {"n 2", C, chat(R"("n":2)"), 400, "n", "unsupported_value", "only n = 1"},
      {"n 0", P, comp(R"("n":0)"), 400, "n", "invalid_value", ">= 1, but got 0"},
      {"n 1.0", C, chat(R"("n":1.0)"), 400, "n", "invalid_type", "expected an integer"},
      {"user number", C, chat(R"("user":5)"), 400, "user", "invalid_type", "expected a string"},
      {"logprobs true", C, chat(R"("logprobs":true)"), 400, "logprobs", "unsupported_value", "logprobs are not supported"},
      {"logprobs int on chat", C, chat(R"("logprobs":1)"), 400, "logprobs", "invalid_type", "expected a boolean"},
      {"logprobs int on completion", P, comp(R"("logprobs":5)"), 400, "logprobs", "unsupported_value", "logprobs are not supported"},
      {"logprobs true on completion", P, comp(R"("logprobs":true)"), 400, "logprobs", "unsupported_value", "not supported"},
      {"logprobs string", P, comp(R"("logprobs":"no")"), 400, "logprobs", "invalid_type", "a boolean or an integer"},
      // Chat options.
      {"reasoning_effort huge", C, chat(R"("reasoning_effort":"huge")"), 400, "reasoning_effort", "invalid_value",
       R"(expected "minimal", "low", "medium", "high" or "max", but got a string ("huge"))"},
      {"reasoning_effort number", C, chat(R"("reasoning_effort":1)"), 400, "reasoning_effort", "invalid_type", "expected a string"},
      // tools, tool_choice, parallel_tool_calls, response_format.
      {"empty tools", C, chat(R"("tools":[])"), 400, "tools", "invalid_value", "expected 1 to 128 tools, but got 0"},
      {"tools object", C, chat(R"("tools":{})"), 400, "tools", "invalid_type", "an array of tools"},
      {"tool not object", C, chat(R"("tools":["f"])"), 400, "tools[0]", "invalid_type", "a tool object"},
      {"tool no type", C, chat(R"("tools":[{"function":{"name":"f"}}])"), 400, "tools[0].type", "missing_required_parameter", ""},
      {"tool custom", C, chat(R"("tools":[{"type":"custom","function":{"name":"f"}}])"), 400, "tools[0].type",
       "unsupported_value", "only function tools"},
      {"tool extra key", C, chat(R"("tools":[{"type":"function","function":{"name":"f"},"x":1}])"), 400, "tools[0].x",
       "unknown_field", ""},
      {"tool no function", C, chat(R"("tools":[{"type":"function"}])"), 400, "tools[0].function",
       "missing_required_parameter", ""},
      {"tool no name", C, chat(R"("tools":[{"type":"function","function":{}}])"), 400, "tools[0].function.name",
       "missing_required_parameter", ""},
      {"tool bad name", C, chat(R"("tools":[{"type":"function","function":{"name":"a b"}}])"), 400,
       "tools[0].function.name", "invalid_value", "1 to 64 characters of a-z"},
      {"tool long name", C, chat(R"("tools":[{"type":"function","function":{"name":")" + std::string(65, 'a') + R"("}}])"),
       400, "tools[0].function.name", "invalid_value", "1 to 64 characters"},
      {"tool params array", C, chat(R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])"), 400,
       "tools[0].function.parameters", "invalid_type", "a JSON Schema object"},
      {"tool function extra", C, chat(R"("tools":[{"type":"function","function":{"name":"f","returns":1}}])"), 400,
       "tools[0].function.returns", "unknown_field", ""},
      {"tool strict string", C, chat(R"("tools":[{"type":"function","function":{"name":"f","strict":"yes"}}])"), 400,
       "tools[0].function.strict", "invalid_type", "a boolean"},
      {"tool twice", C, chat(R"("tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}])"),
       400, "tools[1]", "invalid_value", "declared twice (also tools[0])"},
      {"tool_choice unknown", C, chat(R"("tool_choice":"always")"), 400, "tool_choice", "invalid_value",
       R"(expected "none", "auto", "required" or a named function)"},
      {"tool_choice required without tools", C, chat(R"("tool_choice":"required")"), 400, "tool_choice", "invalid_value",
       "needs tools"},
      {"tool_choice named undeclared", C,
       chat(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}})"),
       400, "tool_choice.function.name", "invalid_value", "'g' is not one of the functions in tools"},
      {"tool_choice named without tools", C, chat(R"("tool_choice":{"type":"function","function":{"name":"g"}})"), 400,
       "tool_choice.function.name", "invalid_value", "not one of the functions"},
      {"tool_choice number", C, chat(R"("tool_choice":1)"), 400, "tool_choice", "invalid_type", "a string or"},
      {"tool_choice allowed_tools", C, chat(R"("tool_choice":{"type":"allowed_tools"})"), 400, "tool_choice.type",
       "unsupported_value", "only \"function\""},
      {"parallel_tool_calls string", C, chat(R"("parallel_tool_calls":"no")"), 400, "parallel_tool_calls", "invalid_type",
       "a boolean"},
      {"response_format unknown", C, chat(R"("response_format":{"type":"yaml"})"), 400, "response_format.type",
       "invalid_value", R"(expected "text", "json_object" or "json_schema")"},
      {"json_schema missing", C, chat(R"("response_format":{"type":"json_schema"})"), 400, "response_format.json_schema",
       "missing_required_parameter", ""},
      {"json_schema no name", C, chat(R"("response_format":{"type":"json_schema","json_schema":{"schema":{}}})"), 400,
       "response_format.json_schema.name", "missing_required_parameter", ""},
      {"json_schema schema string", C,
       chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"a","schema":"x"}})"), 400,
       "response_format.json_schema.schema", "invalid_type", "a JSON Schema object"},
      {"json_object extra key", C, chat(R"("response_format":{"type":"json_object","schema":{}})"), 400,
       "response_format.schema", "unknown_field", ""},
      {"response_format extra key", C, chat(R"("response_format":{"type":"text","x":1})"), 400, "response_format.x",
       "unknown_field", ""},
      // messages.
      {"missing messages", C, R"({"model":"k3"})", 400, "messages", "missing_required_parameter", "'messages'"},
      {"empty messages", C, msgs("[]"), 400, "messages", "invalid_value", "at least one message"},
      {"messages object", C, msgs("{}"), 400, "messages", "invalid_type", "an array of message objects"},
      {"message not object", C, msgs(R"(["hi"])"), 400, "messages[0]", "invalid_type", "a message object"},
      {"message without role", C, msgs(R"([{"content":"hi"}])"), 400, "messages[0].role", "missing_required_parameter", "messages[0].role"},
      {"role null", C, msgs(R"([{"role":null,"content":"hi"}])"), 400, "messages[0].role", "missing_required_parameter", ""},
      {"role number", C, msgs(R"([{"role":1,"content":"hi"}])"), 400, "messages[0].role", "invalid_type", "expected a string"},
      {"role moderator", C, msgs(R"([{"role":"user","content":"a"},{"role":"moderator","content":"hi"}])"), 400,
       "messages[1].role", "invalid_value", R"(but got a string ("moderator"))"},
      {"unknown message key", C, msgs(R"([{"role":"user","content":"hi","foo":1}])"), 400, "messages[0].foo", "unknown_field",
       "Unrecognized request argument supplied: messages[0].foo"},
      {"tool_calls on user", C, msgs(R"([{"role":"user","content":"hi","tool_calls":[]}])"), 400, "messages[0].tool_calls",
       "unknown_field", ""},
      {"tool_call_id on assistant", C, msgs(R"([{"role":"assistant","content":"hi","tool_call_id":"x"}])"), 400,
       "messages[0].tool_call_id", "unknown_field", ""},
      {"reasoning on system", C, msgs(R"([{"role":"system","content":"hi","reasoning_content":"x"}])"), 400,
       "messages[0].reasoning_content", "unknown_field", ""},
      {"name not string", C, msgs(R"([{"role":"user","content":"hi","name":["a"]}])"), 400, "messages[0].name", "invalid_type", ""},
      // content.
      {"user content missing", C, msgs(R"([{"role":"user"}])"), 400, "messages[0].content", "missing_required_parameter",
       "only an assistant message with tool_calls may omit content"},
      {"user content null", C, msgs(R"([{"role":"user","content":null}])"), 400, "messages[0].content", "invalid_type", "but got null"},
      {"system content missing", C, msgs(R"([{"role":"system"}])"), 400, "messages[0].content", "missing_required_parameter", ""},
      {"tool content missing", C, msgs(R"([{"role":"tool","name":"f"}])"), 400, "messages[0].content", "missing_required_parameter", ""},
      {"assistant content null no calls", C, msgs(R"([{"role":"assistant","content":null}])"), 400, "messages[0].content",
       "invalid_type", "unless it has tool_calls"},
      {"assistant content missing empty calls", C, msgs(R"([{"role":"assistant","tool_calls":[]}])"), 400,
       "messages[0].content", "missing_required_parameter", "unless it has tool_calls"},
      {"content number", C, msgs(R"([{"role":"user","content":5}])"), 400, "messages[0].content", "invalid_type",
       "a string or an array of text parts"},
      {"content part not object", C, msgs(R"([{"role":"user","content":["hi"]}])"), 400, "messages[0].content[0]", "invalid_type", ""},
      {"image content part", C,
       msgs(R"([{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"http://x"}}]}])"),
       400, "messages[0].content[1].type", "unsupported_value", "only text content parts are supported (no vision or audio tower runs)"},
      {"audio content part", C, msgs(R"([{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}])"), 400,
       "messages[0].content[0].type", "unsupported_value", "input_audio"},
      {"file content part", C, msgs(R"([{"role":"user","content":[{"type":"file","file":{}}]}])"), 400,
       "messages[0].content[0].type", "unsupported_value", "only text"},
      {"content part without type", C, msgs(R"([{"role":"user","content":[{"text":"hi"}]}])"), 400,
       "messages[0].content[0].type", "missing_required_parameter", ""},
      {"content part type number", C, msgs(R"([{"role":"user","content":[{"type":1,"text":"hi"}]}])"), 400,
       "messages[0].content[0].type", "invalid_type", ""},
      {"content part without text", C, msgs(R"([{"role":"user","content":[{"type":"text"}]}])"), 400,
       "messages[0].content[0].text", "missing_required_parameter", ""},
      {"content part text number", C, msgs(R"([{"role":"user","content":[{"type":"text","text":1}]}])"), 400,
       "messages[0].content[0].text", "invalid_type", ""},
      {"content part extra key", C, msgs(R"([{"role":"user","content":[{"type":"text","text":"a","cache_control":{}}]}])"), 400,
       "messages[0].content[0].cache_control", "unknown_field", ""},
      // Assistant fields.
      {"reasoning_content number", C, msgs(R"([{"role":"assistant","content":"a","reasoning_content":1}])"), 400,
       "messages[0].reasoning_content", "invalid_type", ""},
      {"reasoning array", C, msgs(R"([{"role":"assistant","content":"a","reasoning":[]}])"), 400, "messages[0].reasoning",
       "invalid_type", ""},
      {"tool_calls object", C, msgs(R"([{"role":"assistant","content":"a","tool_calls":{}}])"), 400, "messages[0].tool_calls",
       "invalid_type", "an array of tool calls"},
      {"tool call not object", C, msgs(R"([{"role":"assistant","content":"a","tool_calls":[1]}])"), 400,
       "messages[0].tool_calls[0]", "invalid_type", ""},
      {"tool call unknown key", C, call(R"("index":0,"function":{"name":"f","arguments":"{}"})"), 400,
       "messages[0].tool_calls[0].index", "unknown_field", ""},
      {"tool call id number", C, call(R"("id":1,"function":{"name":"f","arguments":"{}"})"), 400,
       "messages[0].tool_calls[0].id", "invalid_type", ""},
      {"tool call type", C, call(R"("type":"code","function":{"name":"f","arguments":"{}"})"), 400,
       "messages[0].tool_calls[0].type", "invalid_value", R"(expected "function")"},
      {"tool call without function", C, call(R"("id":"a")"), 400, "messages[0].tool_calls[0].function",
       "missing_required_parameter", ""},
      {"tool call function string", C, call(R"("function":"f")"), 400, "messages[0].tool_calls[0].function", "invalid_type", ""},
      {"function unknown key", C, call(R"("function":{"name":"f","arguments":"{}","strict":true})"), 400,
       "messages[0].tool_calls[0].function.strict", "unknown_field", ""},
      {"function without name", C, call(R"("function":{"arguments":"{}"})"), 400, "messages[0].tool_calls[0].function.name",
       "missing_required_parameter", ""},
      {"function empty name", C, call(R"("function":{"name":"","arguments":"{}"})"), 400,
       "messages[0].tool_calls[0].function.name", "invalid_value", "must not be empty"},
      {"function without arguments", C, call(R"("function":{"name":"f"})"), 400,
       "messages[0].tool_calls[0].function.arguments", "missing_required_parameter", ""},
      {"arguments number", C, call(R"("function":{"name":"f","arguments":1})"), 400,
       "messages[0].tool_calls[0].function.arguments", "invalid_type", ""},
      {"arguments null", C, call(R"("function":{"name":"f","arguments":null})"), 400,
       "messages[0].tool_calls[0].function.arguments", "invalid_type", "but got null"},
      {"arguments JSON array string", C, call(R"("function":{"name":"f","arguments":"[1, 2]"})"), 400,
       "messages[0].tool_calls[0].function.arguments", "invalid_value", "not a JSON object (it holds an array)"},
      // Tool messages.
      {"tool_call_id number", C, msgs(R"([{"role":"tool","tool_call_id":1,"name":"f","content":"x"}])"), 400,
       "messages[0].tool_call_id", "invalid_type", ""},
      {"tool message unnamed at start", C, msgs(R"([{"role":"tool","tool_call_id":"a","content":"x"}])"), 400,
       "messages[0]", "invalid_value", "cannot tell which tool this tool message answers"},
      {"tool message beyond calls", C,
       msgs(R"([{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]},)"
            R"({"role":"tool","tool_call_id":"a","content":"1"},{"role":"tool","tool_call_id":"b","content":"2"}])"),
       400, "messages[2]", "invalid_value", "no tool call #2"},
      {"tool message empty name", C, msgs(R"([{"role":"user","content":"q"},{"role":"tool","name":"","content":"x"}])"), 400,
       "messages[1]", "invalid_value", "cannot tell which tool"},
      {"tool message id key", C, msgs(R"([{"role":"tool","id":"a","name":"f","content":"x"}])"), 400, "messages[0].id",
       "unknown_field", ""},
      // Completion prompt and options.
      {"missing prompt", P, R"({"model":"k3"})", 400, "prompt", "missing_required_parameter", "'prompt'"},
      {"empty prompt", P, prompt(R"("")"), 400, "prompt", "invalid_value", "the prompt must not be empty"},
      {"empty prompt ids", P, prompt("[]"), 400, "prompt", "invalid_value", "must not be empty"},
      {"prompt number", P, prompt("5"), 400, "prompt", "invalid_type", "a string or an array of token ids"},
      {"token id at vocab", P, prompt("[1,2,100]"), 400, "prompt[2]", "invalid_value", "from 0 to 99 (the vocabulary has 100 tokens), but got 100"},
      {"token id negative", P, prompt("[-1]"), 400, "prompt[0]", "invalid_value", "but got -1"},
      {"token id huge", P, prompt("[18446744073709551615]"), 400, "prompt[0]", "invalid_value", "18446744073709551615"},
      {"token id float", P, prompt("[1,1.5]"), 400, "prompt[1]", "invalid_type", "a number (1.5)"},
      {"token id bool", P, prompt("[true]"), 400, "prompt[0]", "invalid_type", "a boolean"},
      {"batched text prompts", P, prompt(R"(["a","b"])"), 400, "prompt", "unsupported_value",
       "batched prompts are not supported; send one prompt per request"},
      {"one-string batch", P, prompt(R"(["a"])"), 400, "prompt", "unsupported_value", "batched prompts"},
      {"batched id prompts", P, prompt("[[1,2],[3]]"), 400, "prompt", "unsupported_value", "batched prompts"},
      {"mixed prompt", P, prompt(R"([1,"a"])"), 400, "prompt", "unsupported_value", "batched prompts"},
      {"echo true", P, comp(R"("echo":true)"), 400, "echo", "unsupported_value", "echo is not supported"},
      {"echo string", P, comp(R"("echo":"no")"), 400, "echo", "invalid_type", "expected a boolean"},
      {"suffix", P, comp(R"("suffix":"end")"), 400, "suffix", "unsupported_value", "suffix"},
      {"empty suffix", P, comp(R"("suffix":"")"), 400, "suffix", "unsupported_value", "not supported"},
      {"best_of 2", P, comp(R"("best_of":2)"), 400, "best_of", "unsupported_value", "only best_of = 1"},
      {"best_of 0", P, comp(R"("best_of":0)"), 400, "best_of", "invalid_value", "got 0"},
  };
}

TEST(Request, RefusesBadBodies) {
  for (const Bad& c : bad_cases()) {
    SCOPED_TRACE(c.what);
    try {
      parse_request(c.endpoint, c.body, limits());
      ADD_FAILURE() << "accepted: " << c.body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, c.status) << e.what();
      EXPECT_EQ(e.param, c.param) << e.what();
      EXPECT_EQ(e.code, c.code) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << "message: " << e.what();
      EXPECT_EQ(e.type, c.status == 404 ? "not_found_error" : "invalid_request_error");
      // The response body the server sends must serialise (valid UTF-8 only).
      EXPECT_NO_THROW((void)e.body().dump()) << e.what();
    }
  }
}

GenerationRequest parse_ok(Endpoint endpoint, const std::string& body, const RequestLimits& l = limits()) {
  try {
    return parse_request(endpoint, body, l);
  } catch (const ApiError& e) {
    ADD_FAILURE() << "refused (" << e.param << ", " << e.code << "): " << e.what() << "\nbody: " << body;
    return {};
  }
}

// Accepted chat requests render (thinking on and off).
void expect_renders(const GenerationRequest& req) {
  for (const bool thinking : {true, false}) {
    ChatOptions options;
    options.thinking = thinking;
    options.reasoning_effort = k3_effort_for(req.reasoning_effort);
    options.tools = Json::parse(req.tools.dump());
    options.tool_choice = Json::parse(req.tool_choice.dump());
    options.response_format = Json::parse(req.response_format.dump());
    EXPECT_NO_THROW((void)render_chat(req.messages, options)) << req.messages.dump();
  }
}

TEST(Request, MinimalChatDefaults) {
  const GenerationRequest r = parse_ok(C, chat());
  EXPECT_EQ(r.endpoint, C);
  EXPECT_EQ(r.model, "k3");
  EXPECT_EQ(r.messages, Json::parse(R"([{"role":"user","content":"hi"}])"));
  EXPECT_FALSE(r.reasoning_effort.has_value());  // the family's default
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_EQ(r.user, "");
  EXPECT_FALSE(r.prompt_text.has_value());
  EXPECT_TRUE(r.prompt_ids.empty());
  expect_renders(r);
}

TEST(Request, FullChat) {
  const GenerationRequest r = parse_ok(
      C, R"({"model":"k3-mini","messages":[{"role":"system","content":"terse","name":"sys"},)"
         R"({"role":"user","content":[{"type":"text","text":"2+2?"},{"text":"!","type":"text"}]}],)"
         R"("max_tokens":64,"stop":["\n\n","END","a","b"],"stream":true,"stream_options":{"include_usage":true},)"
         R"("temperature":0,"top_p":0.9,"seed":-42,"n":1,"user":"u-1","logprobs":false,"reasoning_effort":"low"})");
  EXPECT_EQ(r.model, "k3-mini");
  EXPECT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.max_tokens, 64);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END", "a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.seed, -42);
  EXPECT_EQ(r.user, "u-1");
  EXPECT_EQ(r.reasoning_effort, "low");
  expect_renders(r);
}

// Neutral values of the standard parameters ask for nothing: accepted and
// ignored, and the request is the same as without them.
TEST(Request, NeutralStandardParametersAreAccepted) {
  const GenerationRequest plain = parse_ok(C, chat(""));
  const GenerationRequest r = parse_ok(
      C, chat(R"("frequency_penalty":0,"presence_penalty":0.0,"logit_bias":{},"store":false,)"
              R"("metadata":{"session":"abc","user_tier":"pro"},"response_format":{"type":"text"},"top_logprobs":0,)"
              R"("service_tier":"auto","modalities":["text"])"));
  EXPECT_EQ(r.messages, plain.messages);
  EXPECT_EQ(r.reasoning_effort, plain.reasoning_effort);
  const GenerationRequest p =
      parse_ok(P, comp(R"("frequency_penalty":0,"presence_penalty":0,"logit_bias":{"11":0})"));
  EXPECT_EQ(p.prompt_text, "Once");
}

// The API keeps OpenAI's level; K3's chat format maps it onto its three.
TEST(Request, ReasoningEffortKeepsOpenAiLevelsAndK3MapsThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"minimal", "low"}, {"low", "low"}, {"medium", "high"}, {"high", "high"}, {"max", "max"}};
  for (const auto& [given, k3] : cases) {
    const GenerationRequest r = parse_ok(C, chat(std::string(R"("reasoning_effort":")") + given + "\""));
    EXPECT_EQ(r.reasoning_effort, given);
    EXPECT_EQ(k3_reasoning_level(given), k3) << given;
    expect_renders(r);
  }
  EXPECT_EQ(k3_reasoning_level("huge"), "");
}

TEST(Request, ToolsToolChoiceAndResponseFormatAreKeptForTheTemplate) {
  const GenerationRequest r = parse_ok(
      C, chat(R"("tools":[{"type":"function","function":{"name":"get_weather","description":"d","strict":true,)"
              R"("parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},)"
              R"({"type":"function","function":{"name":"now"}}],)"
              R"("tool_choice":{"type":"function","function":{"name":"now"}},"parallel_tool_calls":false,)"
              R"("response_format":{"type":"json_schema","json_schema":{"name":"a_1","strict":true,"schema":{"type":"object"}}})"));
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.tool_choice["function"]["name"], "now");
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.response_format["json_schema"]["name"], "a_1");
  expect_renders(r);
  for (const char* choice : {R"("none")", R"("auto")", R"("required")"}) {
    const GenerationRequest c =
        parse_ok(C, chat(std::string(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":)") + choice));
    EXPECT_EQ(c.tool_choice.dump(), choice);
    EXPECT_TRUE(c.parallel_tool_calls);
    expect_renders(c);
  }
  // "none" and "auto" need no tools; a text format is no format.
  EXPECT_EQ(parse_ok(C, chat(R"("tool_choice":"none")")).tool_choice, "none");
  EXPECT_TRUE(parse_ok(C, chat(R"("response_format":{"type":"text"})")).response_format.is_null());
  EXPECT_EQ(parse_ok(C, chat(R"("response_format":{"type":"json_object"})")).response_format["type"], "json_object");
}

TEST(Request, DeveloperIsRenderedAsSystem) {
  const GenerationRequest dev = parse_ok(C, msgs(R"([{"role":"developer","content":"be terse"},{"role":"user","content":"hi"}])"));
  const GenerationRequest sys = parse_ok(C, msgs(R"([{"role":"system","content":"be terse"},{"role":"user","content":"hi"}])"));
  EXPECT_EQ(dev.messages, sys.messages);
  expect_renders(dev);
}

TEST(Request, NullFieldsCountAsAbsent) {
  const GenerationRequest r = parse_ok(
      C, chat(R"("max_tokens":null,"max_completion_tokens":null,"stop":null,"stream":null,"stream_options":null,)"
              R"("temperature":null,"top_p":null,"seed":null,"n":null,"user":null,"logprobs":null,)"
              R"("reasoning_effort":null,"tools":null,"tool_choice":null,"parallel_tool_calls":null,"response_format":null)"));
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.reasoning_effort.has_value());
  const GenerationRequest p = parse_ok(P, comp(R"("echo":null,"suffix":null,"best_of":null,"logprobs":null)"));
  EXPECT_EQ(p.prompt_text, "Once");
  // Inside stream_options and messages too.
  EXPECT_FALSE(parse_ok(C, chat(R"("stream":true,"stream_options":{"include_usage":null})")).include_usage);
  expect_renders(parse_ok(C, msgs(R"([{"role":"user","content":"a","name":null}])")));
}

TEST(Request, MaxTokens) {
  EXPECT_EQ(parse_ok(C, chat(R"("max_tokens":1)")).max_tokens, 1);
  EXPECT_EQ(parse_ok(C, chat(R"("max_tokens":1000)")).max_tokens, 1000);
  EXPECT_EQ(parse_ok(C, chat(R"("max_completion_tokens":7)")).max_tokens, 7);
  EXPECT_EQ(parse_ok(P, comp(R"("max_tokens":9,"max_completion_tokens":9)")).max_tokens, 9);
  // No ceiling: any positive int64.
  RequestLimits open = limits();
  open.max_tokens_ceiling = 0;
  EXPECT_EQ(parse_ok(C, chat(R"("max_tokens":9223372036854775807)"), open).max_tokens, INT64_MAX);
  try {
    parse_request(C, chat(R"("max_tokens":0)"), open);
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "max_tokens");
    EXPECT_NE(std::string(e.what()).find("an integer >= 1, but got 0"), std::string::npos) << e.what();
  }
}

TEST(Request, StopSeedSampling) {
  EXPECT_EQ(parse_ok(C, chat(R"("stop":"\n")")).stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(parse_ok(C, chat(R"("stop":["é"])")).stop, std::vector<std::string>{"é"});
  EXPECT_EQ(parse_ok(C, chat(R"("seed":9223372036854775807)")).seed, INT64_MAX);
  EXPECT_EQ(parse_ok(C, chat(R"("seed":-9223372036854775808)")).seed, INT64_MIN);
  EXPECT_EQ(parse_ok(P, comp(R"("seed":0)")).seed, 0);
  parse_ok(C, chat(R"("temperature":0)"));
  parse_ok(C, chat(R"("temperature":0.0)"));
  parse_ok(C, chat(R"("temperature":-0.0)"));
  parse_ok(C, chat(R"("top_p":0.9)"));
  parse_ok(C, chat(R"("top_p":1)"));
  parse_ok(P, comp(R"("top_p":1e-9)"));
  parse_ok(C, chat(R"("n":1,"logprobs":false)"));
  parse_ok(P, comp(R"("n":1,"best_of":1,"echo":false,"logprobs":false)"));
  const GenerationRequest s = parse_ok(C, chat(R"("stream":true,"stream_options":{})"));
  EXPECT_TRUE(s.stream);
  EXPECT_FALSE(s.include_usage);
  EXPECT_EQ(parse_ok(C, chat(R"("reasoning_effort":"high")")).reasoning_effort, "high");
}

TEST(Request, MessagesKeptExactlyAsGiven) {
  // Key order, unusual-but-valid fields and non-ASCII text survive untouched.
  const std::string messages =
      R"([{"content":"Olá \u00e9 ☃","role":"system"},{"name":"bob","role":"user","content":""},)"
      R"({"role":"assistant","reasoning_content":null,"reasoning":"hmm","content":[{"text":"x","type":"text"}]},)"
      R"({"role":"user","content":[]}])";
  const GenerationRequest r = parse_ok(C, msgs(messages));
  EXPECT_EQ(r.messages.dump(), Json::parse(messages).dump());
  EXPECT_EQ(r.messages[0].begin().key(), "content");
  expect_renders(r);
}

// The tool messages of an accepted request as the K3 template renders them,
// in order: what follows `<|open|>message role="tool"` up to its end of
// message. (They render the same with thinking on or off.)
std::vector<std::string> rendered_tool_messages(const GenerationRequest& req) {
  const std::string text = render_chat_text(render_chat(req.messages, ChatOptions{}));
  const std::string open = "<|open|>message role=\"tool\"";
  std::vector<std::string> out;
  for (size_t at = text.find(open); at != std::string::npos; at = text.find(open, at + 1)) {
    const size_t body = at + open.size();
    out.push_back(text.substr(body, text.find("<|end_of_msg|>", body) - body));
  }
  return out;
}

// A tool message's rendering after its role, as k3-model.md §9.2 spells it.
std::string tool_message(const std::string& tool, int index, const std::string& content) {
  return " tool=\"" + tool + "\" index=\"" + std::to_string(index) + "\"<|sep|>" + content + "<|close|>message<|sep|>";
}

TEST(Request, ToolHistory) {
  // Tool messages answered out of order by tool_call_id; arguments as a JSON
  // string and as an object; content null beside tool_calls.
  const GenerationRequest r = parse_ok(
      C, msgs(R"([{"role":"user","content":"Weather in Paris and Rome?"},)"
              R"({"role":"assistant","content":null,"tool_calls":[)"
              R"({"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},)"
              R"({"id":"call_2","function":{"name":"get_weather","arguments":{"city":"Rome"}}}]},)"
              R"({"role":"tool","tool_call_id":"call_2","content":"21 C"},)"
              R"({"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"18 C"}]},)"
              R"({"role":"assistant","content":"Paris 18, Rome 21."}])"));
  EXPECT_EQ(r.messages.size(), 5u);
  expect_renders(r);
  // Every id matches a call, so the answers go in call order: Paris's first.
  EXPECT_EQ(rendered_tool_messages(r),
            (std::vector<std::string>{tool_message("get_weather", 1, "18 C"), tool_message("get_weather", 2, "21 C")}));
}

TEST(Request, ToolMessageNames) {
  // Unmatched ids: named by position among the preceding assistant's calls,
  // and counted on across a user message; a name of its own wins.
  const GenerationRequest unmatched = parse_ok(
      C, msgs(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"not json"}},)"
              R"({"function":{"name":"g","arguments":""}}]},)"
              R"({"role":"tool","tool_call_id":"x","content":"1"},{"role":"tool","content":"2"},)"
              R"({"role":"user","content":"more?"},{"role":"tool","name":"h","content":"3"}])"));
  expect_renders(unmatched);
  EXPECT_EQ(rendered_tool_messages(unmatched),
            (std::vector<std::string>{tool_message("f", 1, "1"), tool_message("g", 2, "2"), tool_message("h", 3, "3")}));
  // A tool message with its own name or tool needs no call; an empty name
  // does not hide the tool.
  const GenerationRequest named = parse_ok(C, msgs(R"([{"role":"tool","name":"f","content":"x"}])"));
  expect_renders(named);
  EXPECT_EQ(rendered_tool_messages(named), std::vector<std::string>{tool_message("f", 1, "x")});
  const GenerationRequest tool_field =
      parse_ok(C, msgs(R"([{"role":"tool","tool":"f","name":"","tool_call_id":null,"content":"x"}])"));
  expect_renders(tool_field);
  EXPECT_EQ(rendered_tool_messages(tool_field), std::vector<std::string>{tool_message("f", 1, "x")});
  // Tool messages after a user message count on from the latest assistant's calls.
  const GenerationRequest across = parse_ok(
      C, msgs(R"([{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{}}},)"
              R"({"function":{"name":"g","arguments":{}}}]},{"role":"tool","content":"1"},)"
              R"({"role":"user","content":"u"},{"role":"tool","content":"2"}])"));
  expect_renders(across);
  EXPECT_EQ(rendered_tool_messages(across),
            (std::vector<std::string>{tool_message("f", 1, "1"), tool_message("g", 2, "2")}));
}

TEST(Request, Completion) {
  const GenerationRequest t = parse_ok(P, comp(R"("max_tokens":32,"stop":"\n","stream":true)"));
  EXPECT_EQ(t.endpoint, P);
  EXPECT_EQ(t.prompt_text, "Once");
  EXPECT_TRUE(t.prompt_ids.empty());
  EXPECT_TRUE(t.messages.is_null());
  EXPECT_EQ(t.max_tokens, 32);
  EXPECT_TRUE(t.stream);
  const GenerationRequest ids = parse_ok(P, prompt("[0,1,99,42]"));
  EXPECT_FALSE(ids.prompt_text.has_value());
  EXPECT_EQ(ids.prompt_ids, (std::vector<uint32_t>{0, 1, 99, 42}));
  EXPECT_EQ(parse_ok(P, prompt(R"("  ")")).prompt_text, "  ");
}

TEST(Request, Utf8) {
  // Valid multi-byte text is accepted as is; nlohmann rejects invalid UTF-8
  // at parse time, and the error quotes nothing invalid back.
  EXPECT_EQ(parse_ok(P, prompt("\"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\"")).prompt_text,
            "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(parse_ok(P, prompt(R"("\ud83d\ude00")")).prompt_text, "\xf0\x9f\x98\x80");
  for (const std::string bad : {"\xc3\x28", "\xed\xa0\x80", "\xc0\xaf", "\xf5\x80\x80\x80", "\xe6\x97"}) {
    try {
      parse_request(P, prompt("\"a" + bad + "b\""), limits());
      ADD_FAILURE() << "accepted invalid UTF-8";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.code, "invalid_json");
      EXPECT_NO_THROW((void)e.body().dump()) << e.what();
    }
  }
}

TEST(Request, LongValuesAreClippedInMessages) {
  const std::string key(5000, 'k');
  try {
    parse_request(C, chat("\"" + key + "\":1"), limits());
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, key);
    EXPECT_LT(std::string(e.what()).size(), 300u);
  }
  // A cut never splits a code point.
  std::string model;
  for (int i = 0; i < 100; ++i) model += "\xe2\x98\x83";
  try {
    parse_request(C, R"({"model":")" + model + R"(","messages":[]})", limits());
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
    EXPECT_NO_THROW((void)e.body().dump()) << e.what();
  }
}

// {"a": [[...]]} with `levels` arrays: the tool-call arguments object sits at
// nesting 7 in the body (body, messages, message, tool_calls, call, function,
// arguments), so the body nests 7 + levels deep.
std::string nested_arguments(int levels) {
  return call(R"("function":{"name":"f","arguments":{"a":)" + std::string(levels, '[') + std::string(levels, ']') + "}}");
}
std::string nested_argument_string(int levels) {
  return call(R"("function":{"name":"f","arguments":"{\"a\":)" + std::string(levels, '[') + std::string(levels, ']') +
              "}\"}");
}

TEST(Request, NestingLimit) {
  expect_renders(parse_ok(C, nested_arguments(57)));  // 64 levels
  try {
    parse_request(C, nested_arguments(58), limits());
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "");
    EXPECT_EQ(e.code, "invalid_value");
    EXPECT_NE(std::string(e.what()).find("more than 64 levels deep"), std::string::npos) << e.what();
  }
  // Deep non-object bodies are refused for the depth (no recursion anywhere).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THROW(parse_request(C, deep, limits()), ApiError);
  // Argument strings are parsed by the renderer, so they are held to the same limit.
  expect_renders(parse_ok(C, nested_argument_string(63)));
  try {
    parse_request(C, nested_argument_string(64), limits());
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "messages[0].tool_calls[0].function.arguments");
    EXPECT_EQ(e.code, "invalid_value");
  }
}

}  // namespace
}  // namespace deltafin::api
