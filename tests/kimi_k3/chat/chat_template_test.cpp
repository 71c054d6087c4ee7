// The K3 chat renderer against k3-model.md §9: the gold segment hashes of
// §9.6, and hand-written expectations for each rule of §9.1-§9.4.
#include "model/kimi_k3/chat/chat_template.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "util/error.h"

namespace deltafin {
// Readable gtest failure output for segment lists.
void PrintTo(const ChatSegment& s, std::ostream* os) {
  *os << (s.control ? "C" : "T") << "\"" << s.text << "\"";
}
}  // namespace deltafin

using namespace deltafin;
using json = nlohmann::json;
using Segments = std::vector<ChatSegment>;

namespace {

// ---- §9.6 segment hash -----------------------------------------------------

uint64_t segment_hash(const Segments& segments) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const ChatSegment& s : segments) {
    const uint32_t word = static_cast<uint32_t>(s.text.size()) | (s.control ? 1u << 31 : 0u);
    for (int byte = 0; byte < 4; ++byte) {
      h ^= (word >> (8 * byte)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

// ---- Expected segments, spelled from §9.1 ----------------------------------

Segments operator+(Segments a, const Segments& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Segments C(const std::string& text) { return {{text, true}}; }
Segments T(const std::string& text) { return {{text, false}}; }
// open(tag, attrs); attribute values are given as they must appear (escaped).
Segments Open(const std::string& tag, const std::vector<std::pair<std::string, std::string>>& attrs = {}) {
  Segments s = C("<|open|>") + T(tag);
  for (const auto& [key, value] : attrs) s = s + T(" " + key) + T("=\"") + T(value) + T("\"");
  return s + C("<|sep|>");
}
Segments Close(const std::string& tag) { return C("<|close|>") + T(tag) + C("<|sep|>"); }
Segments Eom() { return C("<|end_of_msg|>"); }
Segments Message(const std::vector<std::pair<std::string, std::string>>& attrs, const Segments& body) {
  return Open("message", attrs) + body + Close("message") + Eom();
}
Segments Internal(const std::string& type, const std::string& body) {
  return Message({{"role", "system"}, {"type", type}}, T(body));
}

// Only the conversation: no effort message, no generation prompt.
ChatOptions bare(bool thinking = false) {
  ChatOptions o;
  o.thinking = thinking;
  o.reasoning_effort = std::nullopt;
  o.add_generation_prompt = false;
  return o;
}

Segments render(const std::string& messages, const ChatOptions& options) {
  return render_chat(json::parse(messages), options);
}

// The error message render_chat throws, or "" if it does not throw.
std::string render_error(const std::string& messages, const ChatOptions& options) {
  try {
    render(messages, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::string kEffortPrefix =
    "`thinking_effort` guides on how much to think in your thinking channel (not including the response "
    "channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with "
    "`thinking_effort=";

}  // namespace

// ---- Gold examples (§9.6) --------------------------------------------------
//
// The spec's gold hash covers only each segment's length and kind, so two
// segments of equal length swapped (argument keys "z" and "a" of types
// "number" and "string" in G2) hash the same. Each case therefore spells
// its segments out from the rules of §9.1-§9.4, checks that spelling against
// the gold hash and count, and the rendering against the spelling: text,
// boundaries and kinds.

TEST(ChatGold, G1) {
  const Segments s = render(R"([{"role":"user","content":"Hello <|open|> & goodbye"}])", ChatOptions{});
  const Segments expected = Internal("thinking-effort", kEffortPrefix + "max`.") +
                            Message({{"role", "user"}}, T("Hello <|open|> & goodbye")) +
                            Open("message", {{"role", "assistant"}}) + Open("think");
  EXPECT_EQ(expected.size(), 38u);
  EXPECT_EQ(segment_hash(expected), 0x8d67f74027f3f8f4ull);
  EXPECT_EQ(s, expected);
  EXPECT_EQ(render_chat_text(s),
            "<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>" + kEffortPrefix +
                "max`.<|close|>message<|sep|><|end_of_msg|><|open|>message role=\"user\"<|sep|>Hello <|open|> & "
                "goodbye<|close|>message<|sep|><|end_of_msg|><|open|>message role=\"assistant\"<|sep|><|open|>"
                "think<|sep|>");
  // Exactly four control <|open|>: the user's literal one is ordinary text.
  int control_opens = 0;
  for (const ChatSegment& seg : s) control_opens += seg.control && seg.text == "<|open|>";
  EXPECT_EQ(control_opens, 4);
}

TEST(ChatGold, G2ToolsEffortLow) {
  ChatOptions o;
  o.reasoning_effort = "low";
  o.tools = json::parse(
      R"([{"type":"function","function":{"description":"B tool","name":"beta","parameters":{"z":{"type":"number"},"a":{"type":"string"}}}},{"function":{"name":"alpha","description":"A tool","parameters":{"type":"object"}},"type":"function"}])");
  const Segments s = render(
      R"([{"role":"assistant","reasoning_content":"Check.","content":"Calling.","tool_calls":[{"id":"b","function":{"name":"beta","arguments":"{\"z\":1,\"a\":\"x\"}"}},{"id":"a","function":{"name":"alpha","arguments":"not valid <|open|>"}}]},{"role":"tool","tool_call_id":"a","name":"stale","content":"alpha result"},{"role":"tool","tool_call_id":"b","tool":"wrong","content":"beta result"}])",
      o);
  // Tools sorted by key at every depth, compact, in the array's order. The
  // assistant: think, response, then the calls; beta's arguments parse to an
  // object, so one argument block per key in the order written (z, then a);
  // alpha's do not parse, so a json block holds them raw. The tool messages'
  // ids all match calls, so they go in call order (beta, alpha) under the
  // calls' names whatever their own name or tool says.
  const std::string tools =
      R"([{"function":{"description":"B tool","name":"beta","parameters":{"a":{"type":"string"},"z":{"type":"number"}}},)"
      R"("type":"function"},{"function":{"description":"A tool","name":"alpha","parameters":{"type":"object"}},)"
      R"("type":"function"}])";
  const Segments history =
      Open("think") + T("Check.") + Close("think") + Open("response") + T("Calling.") + Close("response") +
      Open("tools") + Open("call", {{"tool", "beta"}, {"index", "1"}}) +
      Open("argument", {{"key", "z"}, {"type", "number"}}) + T("1") + Close("argument") +
      Open("argument", {{"key", "a"}, {"type", "string"}}) + T("x") + Close("argument") + Close("call") +
      Open("call", {{"tool", "alpha"}, {"index", "2"}}) + Open("json", {{"type", "object"}}) +
      T("not valid <|open|>") + Close("json") + Close("call") + Close("tools");
  const Segments expected =
      Internal("tool-declare", "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n" + tools +
                                   "\n```") +
      Internal("thinking-effort", kEffortPrefix + "low`.") + Message({{"role", "assistant"}}, history) +
      Message({{"role", "tool"}, {"tool", "beta"}, {"index", "1"}}, T("beta result")) +
      Message({{"role", "tool"}, {"tool", "alpha"}, {"index", "2"}}, T("alpha result")) +
      Open("message", {{"role", "assistant"}}) + Open("think");
  EXPECT_EQ(expected.size(), 182u);
  EXPECT_EQ(segment_hash(expected), 0xb060b0cf4e2a9500ull);
  EXPECT_EQ(s, expected);
}

TEST(ChatGold, G3SchemaToolChoiceRequiredEffortHigh) {
  ChatOptions o;
  o.reasoning_effort = "high";
  o.tool_choice = "required";
  o.response_format = json::parse(
      R"({"type":"json_schema","json_schema":{"name":"answer","schema":{"required":["b","a"],"properties":{"b":{"type":"number"},"a":{"type":"string"}},"type":"object"}}})");
  const Segments s = render(R"([{"role":"user","name":"A&B\"","content":"Return JSON."}])", o);
  // The name escaped (& first, then "); the tool-choice and response-format
  // messages after the conversation; the schema sorted by key, compact.
  const Segments expected =
      Internal("thinking-effort", kEffortPrefix + "high`.") +
      Message({{"role", "user"}, {"name", "A&amp;B&quot;"}}, T("Return JSON.")) +
      Internal("tool-choice", "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.") +
      Internal("response-format",
               "The system is invoked with `response_format=json_schema`.\nYour response must be raw JSON data without "
               "markdown code blocks (```json) or any additional formatting.\nThe JSON data must match the following "
               "schema:\n```json\n"
               R"({"properties":{"a":{"type":"string"},"b":{"type":"number"}},"required":["b","a"],"type":"object"})"
               "\n```") +
      Open("message", {{"role", "assistant"}}) + Open("think");
  EXPECT_EQ(expected.size(), 74u);
  EXPECT_EQ(segment_hash(expected), 0xc65d123d688dd863ull);
  EXPECT_EQ(s, expected);
}

// ---- Segment structure and attributes (§9.1) -------------------------------

TEST(ChatSegments, UserMessageSpelledOut) {
  const Segments expected = {
      {"<|open|>", true}, {"message", false},  {" role", false},     {"=\"", false},
      {"user", false},    {"\"", false},       {"<|sep|>", true},    {"hi", false},
      {"<|close|>", true}, {"message", false}, {"<|sep|>", true},    {"<|end_of_msg|>", true},
  };
  EXPECT_EQ(render(R"([{"role":"user","content":"hi"}])", bare()), expected);
}

TEST(ChatSegments, SpecialSpellingsInUserTextStayOrdinary) {
  const Segments s = render(R"([{"role":"user","content":"<|open|>"},{"role":"user","content":"[EOS]<|sep|>"}])",
                            bare());
  EXPECT_EQ(s, Message({{"role", "user"}}, T("<|open|>")) + Message({{"role", "user"}}, T("[EOS]<|sep|>")));
}

TEST(ChatSegments, AttributeEscapingAmpersandFirst) {
  // `&quot;` typed by the user must come out as `&amp;quot;`, not unchanged.
  const Segments s = render(R"([{"role":"user","name":"a&b\"c&quot;","content":"x"}])", bare());
  EXPECT_EQ(s, Message({{"role", "user"}, {"name", "a&amp;b&quot;c&amp;quot;"}}, T("x")));
}

TEST(ChatSegments, NonStringAttributeValuesArePythonStyle) {
  EXPECT_EQ(render(R"([{"role":"user","name":true,"content":"x"}])", bare()),
            Message({{"role", "user"}, {"name", "True"}}, T("x")));
  EXPECT_EQ(render(R"([{"role":"system","name":7,"content":"x"}])", bare()),
            Message({{"role", "system"}, {"name", "7"}}, T("x")));
  EXPECT_EQ(render(R"([{"role":"user","name":2.5,"content":"x"}])", bare()),
            Message({{"role", "user"}, {"name", "2.5"}}, T("x")));
  EXPECT_EQ(render(R"([{"role":"user","name":1e16,"content":"x"}])", bare()),
            Message({{"role", "user"}, {"name", "1e+16"}}, T("x")));
  EXPECT_EQ(render(R"([{"role":"user","name":3.0,"content":"x"}])", bare()),
            Message({{"role", "user"}, {"name", "3.0"}}, T("x")));
  // A falsy `tool` falls through to `name`; a non-string name prints as Python would.
  EXPECT_EQ(render(R"([{"role":"tool","tool":false,"name":true,"content":"r"}])", bare()),
            Message({{"role", "tool"}, {"tool", "True"}, {"index", "1"}}, T("r")));
}

TEST(ChatSegments, NameOnlyWhenTruthy) {
  for (const char* name : {R"("")", "null", "false", "0", "0.0", "[]", "{}"}) {
    const std::string messages = std::string(R"([{"role":"assistant","content":"x","name":)") + name + "}]";
    EXPECT_EQ(render(messages, bare()), Message({{"role", "assistant"}}, Open("response") + T("x") + Close("response")))
        << name;
  }
  EXPECT_EQ(render_error(R"([{"role":"user","name":["a"],"content":"x"}])", bare()),
            "messages[0].name: expected string, number, boolean or null, got array");
}

TEST(ChatSegments, EmptyAttributeValueDropsOnlyItsSegment) {
  // The empty escaped value vanishes; ` key`, `="` and `"` stay. An empty
  // argument key is the one way to reach an empty attribute value.
  const Segments s = render(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"":1}}}]}])",
                            bare());
  const Segments expected =
      Open("message", {{"role", "assistant"}}) + Open("response") + Close("response") + Open("tools") +
      Open("call", {{"tool", "f"}, {"index", "1"}}) + C("<|open|>") + T("argument") + T(" key") + T("=\"") + T("\"") +
      T(" type") + T("=\"") + T("number") + T("\"") + C("<|sep|>") + T("1") + Close("argument") + Close("call") +
      Close("tools") + Close("message") + Eom();
  EXPECT_EQ(s, expected);
}

// ---- Content (§9.1) --------------------------------------------------------

TEST(ChatContent, StringArrayNullAndEmpty) {
  EXPECT_EQ(render(R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":""},{"text":"b"}]}])",
                   bare()),
            Message({{"role", "user"}}, T("ab")));
  // Parts are joined before tokenising: ["Hello ", "there"] renders as "Hello there".
  EXPECT_EQ(render(R"([{"role":"user","content":[{"type":"text","text":"Hello "},{"type":"text","text":"there"}]}])", bare()),
            render(R"([{"role":"user","content":"Hello there"}])", bare()));
  EXPECT_EQ(render(R"([{"role":"user","content":null}])", bare()), Message({{"role", "user"}}, {}));
  EXPECT_EQ(render(R"([{"role":"user"}])", bare()), Message({{"role", "user"}}, {}));
  EXPECT_EQ(render(R"([{"role":"user","content":""}])", bare()), Message({{"role", "user"}}, {}));
}

TEST(ChatContent, Errors) {
  EXPECT_EQ(render_error(R"([{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":5}])",
                         bare()),
            "messages[2].content: expected string, array of text parts or null, got number");
  EXPECT_EQ(render_error(R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}])", bare()),
            "messages[0].content[0]: image parts are not supported (this runtime runs no vision tower)");
  EXPECT_EQ(render_error(R"([{"role":"user","content":[{"type":"audio","text":"x"}]}])", bare()),
            "messages[0].content[0].type: unsupported content part type \"audio\" (expected \"text\")");
  EXPECT_EQ(render_error(R"([{"role":"user","content":["plain"]}])", bare()),
            "messages[0].content[0]: expected a text part object, got string");
  EXPECT_EQ(render_error(R"([{"role":"user","content":[{"type":"text","text":3}]}])", bare()),
            "messages[0].content[0].text: expected string, got number");
}

TEST(ChatMessages, Errors) {
  EXPECT_EQ(render_error(R"([{"role":"developer","content":"x"}])", bare()),
            "messages[0].role: unknown role \"developer\" (expected system, user, assistant or tool)");
  EXPECT_EQ(render_error(R"([{"role":"user","content":"x"},"hello"])", bare()),
            "messages[1]: expected a message object, got string");
  EXPECT_EQ(render_error(R"([{"content":"x"}])", bare()), "messages[0].role: expected string, got nothing");
  EXPECT_EQ(render_error(R"({"role":"user"})", bare()), "messages: expected array, got object");
}

// ---- Document order and options (§9.2) --------------------------------------

TEST(ChatDocument, EmptyConversationDefaults) {
  EXPECT_EQ(render("[]", ChatOptions{}),
            Internal("thinking-effort", kEffortPrefix + "max`.") + Open("message", {{"role", "assistant"}}) +
                Open("think"));
}

TEST(ChatDocument, NonThinkingModeHasNoEffortNoThinkAndOpensResponse) {
  ChatOptions o;
  o.thinking = false;  // effort stays at its default "max" but is not rendered
  EXPECT_EQ(render(R"([{"role":"assistant","reasoning_content":"hidden","content":"A"}])", o),
            Message({{"role", "assistant"}}, Open("response") + T("A") + Close("response")) +
                Open("message", {{"role", "assistant"}}) + Open("response"));
}

TEST(ChatDocument, ThinkingWithoutEffortMessage) {
  ChatOptions o;
  o.reasoning_effort = std::nullopt;
  EXPECT_EQ(render("[]", o), Open("message", {{"role", "assistant"}}) + Open("think"));
}

TEST(ChatDocument, EffortValues) {
  for (const char* effort : {"low", "high", "max"}) {
    ChatOptions o;
    o.reasoning_effort = effort;
    o.add_generation_prompt = false;
    EXPECT_EQ(render("[]", o), Internal("thinking-effort", kEffortPrefix + effort + "`."));
  }
  for (const char* effort : {"medium", "", "MAX"}) {
    ChatOptions o;
    o.reasoning_effort = effort;
    EXPECT_EQ(render_error("[]", o), std::string("reasoning_effort: expected \"low\", \"high\" or \"max\", got \"") +
                                         effort + "\"");
  }
}

TEST(ChatDocument, OrderOfInternalMessages) {
  ChatOptions o = bare(true);
  o.reasoning_effort = "high";
  o.tools = json::parse(R"([{"name":"t"}])");
  o.tool_choice = "none";
  o.response_format = json::parse(R"({"type":"json_object"})");
  const Segments s = render(R"([{"role":"user","content":"q"}])", o);
  EXPECT_EQ(s, Internal("tool-declare",
                        "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"
                        "[{\"name\":\"t\"}]\n```") +
                   Internal("thinking-effort", kEffortPrefix + "high`.") + Message({{"role", "user"}}, T("q")) +
                   Internal("tool-choice",
                            "The system is invoked with `tool_choice=none`.\n"
                            "You MUST NOT call any tools in the next message.") +
                   Internal("response-format",
                            "The system is invoked with `response_format=json_object`.\nYour response must be raw "
                            "JSON data without markdown code blocks (```json) or any additional formatting."));
}

TEST(ChatDocument, ToolChoiceAutoObjectAndErrors) {
  ChatOptions o = bare();
  o.tool_choice = "auto";
  EXPECT_TRUE(render("[]", o).empty());
  o.tool_choice = json::parse(R"({"type":"function","function":{"name":"f"}})");
  EXPECT_TRUE(render("[]", o).empty());
  o.tool_choice = "sometimes";
  EXPECT_EQ(render_error("[]", o), "tool_choice: unknown value \"sometimes\" (expected \"auto\", \"required\" or \"none\")");
  o.tool_choice = 3;
  EXPECT_EQ(render_error("[]", o), "tool_choice: expected \"auto\", \"required\", \"none\", an object or null, got number");
}

TEST(ChatDocument, EmptyOrBadRequestTools) {
  ChatOptions o = bare();
  o.tools = json::array();
  EXPECT_TRUE(render("[]", o).empty());
  o.tools = json::parse(R"({"name":"t"})");
  EXPECT_EQ(render_error("[]", o), "tools: expected array or null, got object");
}

// ---- JSON serialisation of declarations and schemas (§9.3) -------------------

TEST(ChatJson, ToolDeclarationsDeepSortedCompactUtf8) {
  ChatOptions o = bare();
  // Nested objects sorted, arrays kept in order, non-ASCII kept, '/' not
  // escaped, controls escaped the way Python's json.dumps does.
  o.tools = json::parse(
      R"([{"z":[{"b":1,"a":2},3],"a":"naïve \"q\" a/b\n\u0001\t","m":{"y":null,"x":true,"w":1.5,"v":-0.0,"u":1e16}}])");
  const Segments s = render("[]", o);
  ASSERT_EQ(s.size(), 16u);
  EXPECT_EQ(s[11].text,
            "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"
            "[{\"a\":\"naïve \\\"q\\\" a/b\\n\\u0001\\t\",\"m\":{\"u\":1e+16,\"v\":-0.0,\"w\":1.5,\"x\":true,\"y\":null},"
            "\"z\":[{\"a\":2,\"b\":1},3]}]\n```");
}

TEST(ChatJson, ResponseSchemaFallbackChain) {
  const std::string prefix =
      "The system is invoked with `response_format=json_schema`.\nYour response must be raw JSON data without "
      "markdown code blocks (```json) or any additional formatting.\nThe JSON data must match the following "
      "schema:\n```json\n";
  ChatOptions o = bare();
  o.response_format = json::parse(R"({"type":"json_schema","json_schema":{"schema":{"b":1,"a":2},"json_schema":{"c":3}}})");
  EXPECT_EQ(render("[]", o), Internal("response-format", prefix + "{\"a\":2,\"b\":1}\n```"));
  o.response_format = json::parse(R"({"type":"json_schema","json_schema":{"schema":null,"json_schema":{"c":3}}})");
  EXPECT_EQ(render("[]", o), Internal("response-format", prefix + "{\"c\":3}\n```"));
  o.response_format = json::parse(R"({"type":"json_schema","json_schema":{"type":"string"}})");
  EXPECT_EQ(render("[]", o), Internal("response-format", prefix + "{\"type\":\"string\"}\n```"));
}

TEST(ChatJson, ResponseFormatTextAndErrors) {
  ChatOptions o = bare();
  o.response_format = json::parse(R"({"type":"text"})");
  EXPECT_TRUE(render("[]", o).empty());
  o.response_format = json::parse(R"({"type":"xml"})");
  EXPECT_EQ(render_error("[]", o),
            "response_format.type: unknown value \"xml\" (expected \"text\", \"json_object\" or \"json_schema\")");
  o.response_format = json::parse(R"({"type":"json_schema"})");
  EXPECT_EQ(render_error("[]", o), "response_format.json_schema: expected object, got nothing");
  o.response_format = "json_object";
  EXPECT_EQ(render_error("[]", o), "response_format: expected object or null, got string");
}

// ---- System messages with tools (§9.2) --------------------------------------

TEST(ChatSystem, DynamicToolDeclare) {
  const Segments s = render(
      R"([{"role":"system","content":"ignored","name":"ignored","tools":[{"name":"late","b":[2,1]}]},
          {"role":"system","content":"plain","tools":[]}])",
      bare());
  EXPECT_EQ(s, Internal("tool-declare",
                        "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
                        "You have access to all existing and extended tools.\nHere are the specs for the extended "
                        "tools.\n\n```json\n[{\"b\":[2,1],\"name\":\"late\"}]\n```") +
                   Message({{"role", "system"}}, T("plain")));
  EXPECT_EQ(render_error(R"([{"role":"system","tools":"all"}])", bare()),
            "messages[0].tools: expected array, got string");
}

// ---- Assistant history (§9.3) ------------------------------------------------

TEST(ChatAssistant, ReasoningChoiceAndBlankness) {
  const ChatOptions o = bare(/*thinking=*/true);
  auto assistant = [](const Segments& reasoning) {
    return Message({{"role", "assistant"}},
                   Open("think") + reasoning + Close("think") + Open("response") + T("A") + Close("response"));
  };
  EXPECT_EQ(render(R"([{"role":"assistant","reasoning_content":" R1 ","reasoning":"R2","content":"A"}])", o),
            assistant(T(" R1 ")));  // untrimmed
  EXPECT_EQ(render(R"([{"role":"assistant","reasoning_content":"","reasoning":"R2","content":"A"}])", o),
            assistant(T("R2")));
  EXPECT_EQ(render(R"([{"role":"assistant","reasoning":"R2","content":"A"}])", o), assistant(T("R2")));
  // Truthy but blank: chosen, then not emitted; no fallback to `reasoning`.
  EXPECT_EQ(render(R"([{"role":"assistant","reasoning_content":" \n\u3000","reasoning":"R2","content":"A"}])", o),
            assistant({}));
  EXPECT_EQ(render(R"([{"role":"assistant","content":"A"}])", o), assistant({}));
  EXPECT_EQ(render_error(R"([{"role":"assistant","reasoning":5}])", o),
            "messages[0].reasoning: expected string or null, got number");
}

TEST(ChatAssistant, ArgumentTypesFromStringInWrittenOrder) {
  const Segments s = render(
      R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":
          "{\"s\":\"raw \\\"x\\\" é\",\"b\":true,\"n\":null,\"i\":3,\"f\":2.5,\"o\":{\"z\":[1,\"é\"],\"a\":{}},\"a\":[1,2,[]],\"e\":1e15}"}}]}])",
      bare());
  auto arg = [](const std::string& key, const std::string& type, const std::string& value) {
    return Open("argument", {{"key", key}, {"type", type}}) + T(value) + Close("argument");
  };
  const Segments expected =
      Open("message", {{"role", "assistant"}}) + Open("response") + Close("response") + Open("tools") +
      Open("call", {{"tool", "f"}, {"index", "1"}}) + arg("s", "string", "raw \"x\" é") + arg("b", "boolean", "true") +
      arg("n", "null", "null") + arg("i", "number", "3") + arg("f", "number", "2.5") +
      arg("o", "object", "{\"z\": [1, \"é\"], \"a\": {}}") + arg("a", "array", "[1, 2, []]") +
      arg("e", "number", "1000000000000000.0") + Close("call") + Close("tools") + Close("message") + Eom();
  EXPECT_EQ(s, expected);
}

TEST(ChatAssistant, ObjectArgumentsKeyOrder) {
  const std::string messages =
      R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"z":"1","a":"2"}}}]}])";
  auto with_keys = [](const std::string& first, const std::string& second) {
    auto value = [](const std::string& key) { return key == "z" ? "1" : "2"; };
    return Open("message", {{"role", "assistant"}}) + Open("response") + Close("response") + Open("tools") +
           Open("call", {{"tool", "f"}, {"index", "1"}}) +
           Open("argument", {{"key", first}, {"type", "string"}}) + T(value(first)) + Close("argument") +
           Open("argument", {{"key", second}, {"type", "string"}}) + T(value(second)) + Close("argument") +
           Close("call") + Close("tools") + Close("message") + Eom();
  };
  // ordered_json keeps the client's order; nlohmann::json has already sorted it.
  EXPECT_EQ(render_chat(nlohmann::ordered_json::parse(messages), bare()), with_keys("z", "a"));
  EXPECT_EQ(render_chat(json::parse(messages), bare()), with_keys("a", "z"));
}

TEST(ChatAssistant, NoArgumentsUnparsableAndNonObject) {
  const Segments calls_without_arguments =
      Open("message", {{"role", "assistant"}}) + Open("response") + Close("response") + Open("tools") +
      Open("call", {{"tool", "a"}, {"index", "1"}}) + Close("call") + Open("call", {{"tool", "b"}, {"index", "2"}}) +
      Close("call") + Open("call", {{"tool", "c"}, {"index", "3"}}) + Close("call") + Close("tools") +
      Close("message") + Eom();
  EXPECT_EQ(render(R"([{"role":"assistant","tool_calls":[{"function":{"name":"a","arguments":null}},
                       {"function":{"name":"b","arguments":" \n "}},{"function":{"name":"c"}}]}])",
                   bare()),
            calls_without_arguments);

  EXPECT_EQ(render(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"a\": 1"}}]}])", bare()),
            Open("message", {{"role", "assistant"}}) + Open("response") + Close("response") + Open("tools") +
                Open("call", {{"tool", "f"}, {"index", "1"}}) + Open("json", {{"type", "object"}}) + T("{\"a\": 1") +
                Close("json") + Close("call") + Close("tools") + Close("message") + Eom());

  EXPECT_EQ(render_error(R"([{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"[1,2]"}}]}])",
                         bare()),
            "messages[1].tool_calls[0].function.arguments: the string parses as a JSON array, expected an object");
  EXPECT_EQ(render_error(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"\"s\""}}]}])", bare()),
            "messages[0].tool_calls[0].function.arguments: the string parses as a JSON string, expected an object");
  EXPECT_EQ(render_error(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":7}}]}])", bare()),
            "messages[0].tool_calls[0].function.arguments: expected object, JSON string or null, got number");
  EXPECT_EQ(render_error(R"([{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}])", bare()),
            "messages[0].tool_calls[0].function.name: expected non-empty string, got nothing");
  EXPECT_EQ(render_error(R"([{"role":"assistant","tool_calls":[{"name":"f"}]}])", bare()),
            "messages[0].tool_calls[0].function: expected object, got nothing");
}

TEST(ChatAssistant, PythonFloatFormattingInArguments) {
  const Segments s = render(
      R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":
          "{\"v\":[1e16,1e15,0.0001,1e-5,100.0,-0.0,0.1,1.5e300,123456789.125]}"}}]}])",
      bare());
  ASSERT_GT(s.size(), 30u);
  bool found = false;
  for (const ChatSegment& seg : s) {
    if (seg.text.front() == '[') {
      EXPECT_EQ(seg.text, "[1e+16, 1000000000000000.0, 0.0001, 1e-05, 100.0, -0.0, 0.1, 1.5e+300, 123456789.125]");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

// ---- Tool messages (§9.2, §9.3) ----------------------------------------------

namespace {
// An assistant message with calls to `names` (ids "id1", "id2", ...) rendered
// without thinking, as the expectation for the tests below.
Segments assistant_with_calls(const std::vector<std::string>& names) {
  Segments s = Open("message", {{"role", "assistant"}}) + Open("response") + Close("response") + Open("tools");
  for (size_t i = 0; i < names.size(); ++i) {
    s = s + Open("call", {{"tool", names[i]}, {"index", std::to_string(i + 1)}}) + Close("call");
  }
  return s + Close("tools") + Close("message") + Eom();
}
Segments tool_result(const std::string& name, int index, const std::string& content) {
  return Message({{"role", "tool"}, {"tool", name}, {"index", std::to_string(index)}}, T(content));
}
const std::string kTwoCalls =
    R"({"role":"assistant","tool_calls":[{"id":"id1","function":{"name":"first"}},{"id":"id2","function":{"name":"second"}}]})";
}  // namespace

TEST(ChatTools, UnresolvableNameIsAnError) {
  // A user message between does not reset the count: the last result is #3,
  // and the assistant has no call #3 to lend it a name.
  EXPECT_EQ(render_error("[" + kTwoCalls + R"(,{"role":"tool","tool":"T","content":"r1"},{"role":"user","content":"u"},
                          {"role":"tool","content":"r2"},{"role":"tool","tool":null,"name":"","content":"r3"}])",
                         bare()),
            "messages[4]: tool message has no \"tool\" or \"name\", and the preceding assistant message has no call #3 "
            "to take the name from");
}

TEST(ChatTools, NameFallbackToCallFunctionName) {
  // No ids, so no reordering; names come from tool, then name, then call #i.
  const Segments s = render("[" + kTwoCalls + R"(,
      {"role":"tool","tool":"T","name":"N","content":"r1"},
      {"role":"tool","tool":"","content":"r2"},
      {"role":"user","content":"u"},
      {"role":"tool","name":"N3","content":"r3"}])",
                            bare());
  EXPECT_EQ(s, assistant_with_calls({"first", "second"}) + tool_result("T", 1, "r1") + tool_result("second", 2, "r2") +
                   Message({{"role", "user"}}, T("u")) + tool_result("N3", 3, "r3"));

  const Segments by_name = render("[" + kTwoCalls + R"(,{"role":"tool","name":"N","content":"r1"},{"role":"tool","content":"r2"}])",
                                  bare());
  EXPECT_EQ(by_name, assistant_with_calls({"first", "second"}) + tool_result("N", 1, "r1") +
                         tool_result("second", 2, "r2"));
}

TEST(ChatTools, IndexRestartsAfterEachAssistant) {
  const Segments s = render("[" + kTwoCalls + R"(,{"role":"tool","content":"a"},)" + kTwoCalls +
                                R"(,{"role":"tool","content":"b"},{"role":"tool","content":"c"}])",
                            bare());
  EXPECT_EQ(s, assistant_with_calls({"first", "second"}) + tool_result("first", 1, "a") +
                   assistant_with_calls({"first", "second"}) + tool_result("first", 1, "b") +
                   tool_result("second", 2, "c"));
}

TEST(ChatTools, ToolWithoutAnyAssistantNeedsAName) {
  EXPECT_EQ(render(R"([{"role":"tool","tool":"t","content":"r"},{"role":"tool","name":"n","content":"s"}])", bare()),
            tool_result("t", 1, "r") + tool_result("n", 2, "s"));
  EXPECT_EQ(render_error(R"([{"role":"tool","content":"r"}])", bare()),
            "messages[0]: tool message has no \"tool\" or \"name\", and the preceding assistant message has no call #1 "
            "to take the name from");
}

TEST(ChatTools, ReorderedIntoCallOrderWhenEveryIdMatches) {
  // tool_call_id first, `id` as the fallback; stale names are replaced.
  const Segments s = render("[" + kTwoCalls + R"(,
      {"role":"tool","tool_call_id":"id2","tool":"stale","content":"for second"},
      {"role":"tool","id":"id1","name":"stale","content":"for first"}])",
                            bare());
  EXPECT_EQ(s, assistant_with_calls({"first", "second"}) + tool_result("first", 1, "for first") +
                   tool_result("second", 2, "for second"));
}

TEST(ChatTools, KeptInOrderWhenAnyIdDoesNotMatch) {
  const Segments s = render("[" + kTwoCalls + R"(,
      {"role":"tool","tool_call_id":"id2","content":"x"},
      {"role":"tool","tool_call_id":"other","tool":"mine","content":"y"}])",
                            bare());
  // Unchanged order; the first takes call #1's name by position, not by id.
  EXPECT_EQ(s, assistant_with_calls({"first", "second"}) + tool_result("first", 1, "x") + tool_result("mine", 2, "y"));

  const Segments missing_id = render("[" + kTwoCalls + R"(,
      {"role":"tool","tool_call_id":"id2","content":"x"},
      {"role":"tool","content":"y"}])",
                                     bare());
  EXPECT_EQ(missing_id,
            assistant_with_calls({"first", "second"}) + tool_result("first", 1, "x") + tool_result("second", 2, "y"));
}

TEST(ChatTools, OnlyTheRunDirectlyAfterTheAssistantIsReordered) {
  const Segments s = render("[" + kTwoCalls + R"(,
      {"role":"tool","tool_call_id":"id2","content":"x"},
      {"role":"user","content":"u"},
      {"role":"tool","tool_call_id":"id1","content":"y"}])",
                            bare());
  // Run 1 (id2 alone) matches, so it is named "second"; the later one is not
  // in the run and falls back to call #2 by its count.
  EXPECT_EQ(s, assistant_with_calls({"first", "second"}) + tool_result("second", 1, "x") +
                   Message({{"role", "user"}}, T("u")) + tool_result("second", 2, "y"));
}

// ---- Encoding and display ----------------------------------------------------

TEST(ChatEncode, EncodesEachSegmentOnItsOwnAndConcatenates) {
  const Segments segments = C("<|open|>") + T("ab") + Segments{{"", false}} + C("<|sep|>");
  std::vector<std::pair<std::string, bool>> calls;
  const std::vector<uint32_t> ids = encode_chat(segments, [&](std::string_view text, bool control) {
    calls.emplace_back(std::string(text), control);
    std::vector<uint32_t> out;
    if (control) out.push_back(1000 + static_cast<uint32_t>(text.size()));
    else for (unsigned char c : text) out.push_back(c);
    return out;
  });
  EXPECT_EQ(ids, (std::vector<uint32_t>{1008, 'a', 'b', 1007}));
  const std::vector<std::pair<std::string, bool>> expected_calls = {{"<|open|>", true}, {"ab", false}, {"<|sep|>", true}};
  EXPECT_EQ(calls, expected_calls);  // the empty segment is never encoded
  EXPECT_EQ(render_chat_text(segments), "<|open|>ab<|sep|>");
}
