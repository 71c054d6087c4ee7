// Anthropic Messages request validation and translation
// (server/api/anthropic_request.h): bodies that must be refused (status,
// param and a piece of the message), and good bodies with the chat request
// they translate to, written out by hand. Every accepted body is also
// rendered with K3's template, as the OpenAI route's accepted chats are.
#include "server/api/anthropic_request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/kimi_k3/chat/chat_template.h"

namespace deltafin::api {
namespace {

using Json = nlohmann::ordered_json;

RequestLimits limits() { return {{"k3"}, 50000, 100}; }

// A /v1/messages body with one user message plus `extra` fields ("" for none).
std::string body(const std::string& extra = "") {
  return R"({"model":"k3","max_tokens":100,"messages":[{"role":"user","content":"hi"}])" +
         (extra.empty() ? "" : "," + extra) + "}";
}
// A /v1/messages body with the given messages array.
std::string msgs(const std::string& messages, const std::string& extra = "") {
  return R"({"model":"k3","max_tokens":100,"messages":)" + messages + (extra.empty() ? "" : "," + extra) + "}";
}

const char* kToolTurn =
    R"({"role":"assistant","content":[{"type":"text","text":"Checking."},)"
    R"({"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]})";

struct Bad {
  const char* what;
  std::string body;
  int status;
  std::string param;
  std::string needle;  // part of the message
  bool count_tokens = false;
};

std::vector<Bad> bad_cases() {
  return {
      {"not JSON", "{", 400, "", "not valid JSON"},
      {"unknown field", body(R"("frequency_penalty":0)"), 400, "frequency_penalty", "Unrecognized"},
      {"a server feature", body(R"("mcp_servers":[])"), 400, "mcp_servers", "MCP servers"},
      {"no model", R"({"max_tokens":1,"messages":[]})", 400, "model", "Missing required parameter"},
      {"another model", R"({"model":"claude-sonnet-5","max_tokens":1,"messages":[{"role":"user","content":"x"}]})", 404,
       "model", "does not exist"},
      {"no max_tokens", R"({"model":"k3","messages":[{"role":"user","content":"hi"}]})", 400, "max_tokens",
       "Missing required parameter"},
      {"max_tokens above the ceiling", R"({"model":"k3","max_tokens":50001,"messages":[{"role":"user","content":"x"}]})",
       400, "max_tokens", "from 1 to 50000"},
      {"max_tokens on count_tokens", R"({"model":"k3","max_tokens":5,"messages":[{"role":"user","content":"x"}]})", 400,
       "max_tokens", "Unrecognized", true},
      {"empty messages", msgs("[]"), 400, "messages", "at least one message"},
      {"a tool role", msgs(R"([{"role":"tool","content":"x"}])"), 400, "messages[0].role",
       "expected \"user\", \"assistant\" or \"system\""},
      {"clearing tool uses", body(R"("context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]})"), 400,
       "context_management.edits[0].type", "only clear_thinking_20251015"},
      {"a negative thinking keep",
       body(R"("context_management":{"edits":[{"type":"clear_thinking_20251015","keep":{"type":"thinking_turns","value":-1}}]})"),
       400, "context_management.edits[0].keep.value", ">= 0"},
      {"an extra message key", msgs(R"([{"role":"user","content":"x","name":"n"}])"), 400, "messages[0].name",
       "Unrecognized"},
      {"an image", msgs(R"([{"role":"user","content":[{"type":"image","source":{}}]}])"), 400,
       "messages[0].content[0].type", "only text"},
      {"redacted thinking", msgs(R"([{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"}]},{"role":"user","content":"x"}])"),
       400, "messages[0].content[0].type", "redacted_thinking"},
      {"a final assistant message", msgs(R"([{"role":"user","content":"x"},{"role":"assistant","content":"The answer is"}])"),
       400, "messages[1]", "prefilled"},
      {"empty user content", msgs(R"([{"role":"user","content":[]}])"), 400, "messages[0].content", "at least one"},
      {"a tool result for no call", msgs(R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9"}]}])"),
       400, "messages[0].content[0].tool_use_id", "assistant message just before"},
      {"a tool result for a call two turns back",
       msgs(std::string("[{\"role\":\"user\",\"content\":\"x\"},") + kToolTurn +
            R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]},)"
            R"({"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1"}]}])"),
       400, "messages[4].content[0].tool_use_id", "just before"},
      {"a tool result after text",
       msgs(std::string("[{\"role\":\"user\",\"content\":\"x\"},") + kToolTurn +
            R"(,{"role":"user","content":[{"type":"text","text":"t"},{"type":"tool_result","tool_use_id":"toolu_1"}]}])"),
       400, "messages[2].content[1]", "must come before any text"},
      {"tool input not an object",
       msgs(R"([{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":"{}"}]},{"role":"user","content":"y"}])"),
       400, "messages[1].content[0].input", "expected an object"},
      {"a tool_use id twice",
       msgs(R"([{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"a","name":"f","input":{}}]},{"role":"user","content":"y"}])"),
       400, "messages[1].content[1].id", "used twice"},
      {"a bad cache_control", body(R"("system":[{"type":"text","text":"s","cache_control":{"type":"persistent"}}])"), 400,
       "system[0].cache_control.type", "ephemeral"},
      {"a server tool", body(R"("tools":[{"type":"web_search_20250305","name":"web_search"}])"), 400, "tools[0].type",
       "server tool"},
      {"a tool without a schema", body(R"("tools":[{"name":"f"}])"), 400, "tools[0].input_schema",
       "Missing required parameter"},
      {"a tool name with a space", body(R"("tools":[{"name":"get weather","input_schema":{"type":"object"}}])"), 400,
       "tools[0].name", "1 to 64 characters"},
      {"a tool declared twice",
       body(R"("tools":[{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}])"), 400, "tools[1]", "declared twice"},
      {"tool_choice any without tools", body(R"("tool_choice":{"type":"any"})"), 400, "tool_choice.type", "needs tools"},
      {"tool_choice of an undeclared tool",
       body(R"("tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"g"})"), 400,
       "tool_choice.name", "not one of the tools"},
      {"tool_choice as a string", body(R"("tool_choice":"auto")"), 400, "tool_choice", "expected an object"},
      {"a thinking budget below 1024", body(R"("thinking":{"type":"enabled","budget_tokens":1000})"), 400,
       "thinking.budget_tokens", ">= 1024"},
      {"a thinking budget not below max_tokens",
       msgs(R"([{"role":"user","content":"x"}])", R"("thinking":{"type":"enabled","budget_tokens":1024})"), 400,
       "thinking.budget_tokens", "less than max_tokens (100)"},
      {"thinking between_tools", body(R"("thinking":{"type":"between_tools"})"), 400, "thinking.type", "expected"},
      {"an unknown effort", body(R"("output_config":{"effort":"huge"})"), 400, "output_config.effort", "expected"},
      {"temperature 1", body(R"("temperature":1)"), 400, "temperature", "greedily"},
      {"temperature above 1", body(R"("temperature":1.5)"), 400, "temperature", "from 0 to 1"},
      {"top_k 0", body(R"("top_k":0)"), 400, "top_k", ">= 1"},
      {"an empty stop sequence", body(R"("stop_sequences":[""])"), 400, "stop_sequences[0]", "must not be empty"},
      {"17 stop sequences",
       body(R"("stop_sequences":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"])"), 400,
       "stop_sequences", "at most 16"},
      {"metadata with another key", body(R"("metadata":{"user":"x"})"), 400, "metadata.user", "Unrecognized"},
      {"the fast speed", body(R"("speed":"fast")"), 400, "speed", "one speed"},
  };
}

TEST(AnthropicRequest, RefusesEachBadBodyNamingTheField) {
  for (const Bad& c : bad_cases()) {
    SCOPED_TRACE(c.what);
    try {
      parse_messages_request(c.body, limits(), c.count_tokens);
      ADD_FAILURE() << "accepted: " << c.body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, c.status) << e.what();
      EXPECT_EQ(e.param, c.param) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
      EXPECT_NO_THROW((void)e.body().dump());
    }
  }
}

// A conversation with every block kind, and the chat request it must become.
TEST(AnthropicRequest, TranslatesEveryBlockKindIntoTheChatForm) {
  const std::string text = R"({
    "model": "k3", "max_tokens": 8000,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "Use tools."}],
    "messages": [
      {"role": "user", "content": "Weather in Paris and Rome?"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Two cities.", "signature": "sig"},
        {"type": "thinking", "thinking": "Two calls.", "signature": ""},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Rome", "days": 2}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": [{"type": "text", "text": "Rain"}]},
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "no data", "is_error": true},
        {"type": "text", "text": "And tomorrow?"}]}],
    "tools": [{"name": "get_weather", "description": "Weather now", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
               "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
    "thinking": {"type": "enabled", "budget_tokens": 5000},
    "stop_sequences": ["END", "STOP"], "stream": true, "top_k": 40, "top_p": 0.9, "temperature": 0,
    "metadata": {"user_id": "u1"}, "service_tier": "auto"
  })";
  const MessagesRequest m = parse_messages_request(text, limits(), false);
  const Json expected_messages = Json::parse(R"([
    {"role": "system", "content": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}]},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "reasoning_content": "Two cities.\n\nTwo calls.", "content": [{"type": "text", "text": "Checking."}],
     "tool_calls": [{"id": "toolu_a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                    {"id": "toolu_b", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}}]},
    {"role": "tool", "tool_call_id": "toolu_b", "name": "get_weather", "content": [{"type": "text", "text": "Rain"}]},
    {"role": "tool", "tool_call_id": "toolu_a", "name": "get_weather", "content": "Error: no data"},
    {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]}])");
  EXPECT_EQ(m.chat.messages, expected_messages) << m.chat.messages.dump(1);
  EXPECT_EQ(m.chat.tools, Json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])"));
  EXPECT_EQ(m.chat.tool_choice, "auto");
  EXPECT_FALSE(m.chat.parallel_tool_calls);
  EXPECT_TRUE(m.chat.thinking);
  EXPECT_EQ(m.chat.reasoning_effort, "medium");  // 5,000 is in [4,000, 16,000)
  EXPECT_TRUE(m.show_thinking);
  EXPECT_EQ(m.chat.stop, (std::vector<std::string>{"END", "STOP"}));
  EXPECT_TRUE(m.chat.stream);
  EXPECT_EQ(m.chat.max_tokens, 8000);
  EXPECT_EQ(m.chat.endpoint, Endpoint::Chat);

  ChatOptions o;
  o.thinking = m.chat.thinking;
  o.reasoning_effort = k3_effort_for(m.chat.reasoning_effort);
  o.tools = m.chat.tools;
  o.tool_choice = m.chat.tool_choice;
  EXPECT_NO_THROW((void)render_chat(m.chat.messages, o));
}

TEST(AnthropicRequest, ThinkingAndEffortPickTheReasoningLevel) {
  struct Case {
    std::string extra;
    bool thinking;
    std::optional<std::string> effort;
    bool show = true;
  };
  const std::vector<Case> cases = {
      {"", false, std::nullopt},
      {R"("thinking":{"type":"disabled"})", false, std::nullopt},
      {R"("thinking":{"type":"adaptive"})", true, std::nullopt},
      {R"("thinking":{"type":"adaptive","display":"omitted"})", true, std::nullopt, false},
      {R"("thinking":{"type":"enabled","budget_tokens":1024})", true, "low"},
      {R"("thinking":{"type":"enabled","budget_tokens":3999})", true, "low"},
      {R"("thinking":{"type":"enabled","budget_tokens":4000})", true, "medium"},
      {R"("thinking":{"type":"enabled","budget_tokens":16000})", true, "high"},
      {R"("thinking":{"type":"enabled","budget_tokens":31999})", true, "high"},
      {R"("thinking":{"type":"enabled","budget_tokens":32000,"display":"summarized"})", true, "max"},
      {R"("thinking":{"type":"enabled","budget_tokens":32000},"output_config":{"effort":"low"})", true, "low"},
      {R"("thinking":{"type":"adaptive"},"output_config":{"effort":"xhigh"})", true, "high"},
      {R"("output_config":{"effort":"max"})", false, "max"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.extra);
    const std::string text = R"({"model":"k3","max_tokens":40000,"messages":[{"role":"user","content":"x"}])" +
                             (c.extra.empty() ? "" : "," + c.extra) + "}";
    const MessagesRequest m = parse_messages_request(text, limits(), false);
    EXPECT_EQ(m.chat.thinking, c.thinking);
    EXPECT_EQ(m.chat.reasoning_effort, c.effort);
    EXPECT_EQ(m.show_thinking, c.show);
  }
}

TEST(AnthropicRequest, ToolChoicesAndOutputFormatMapOntoTheChatForm) {
  const std::string tools = R"("tools":[{"name":"f","input_schema":{"type":"object"}},{"name":"g","input_schema":{}}])";
  struct Case {
    std::string choice;
    Json expected;
    bool parallel;
  };
  const std::vector<Case> cases = {
      {R"({"type":"auto"})", "auto", true},
      {R"({"type":"any"})", "required", true},
      {R"({"type":"none"})", "none", true},
      {R"({"type":"tool","name":"g","disable_parallel_tool_use":true})",
       Json::parse(R"({"type":"function","function":{"name":"g"}})"), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.choice);
    const MessagesRequest m = parse_messages_request(body(tools + R"(,"tool_choice":)" + c.choice), limits(), false);
    EXPECT_EQ(m.chat.tool_choice, c.expected);
    EXPECT_EQ(m.chat.parallel_tool_calls, c.parallel);
    EXPECT_EQ(m.chat.tools.size(), 2u);
  }
  const MessagesRequest none = parse_messages_request(body(R"("tools":[])"), limits(), false);
  EXPECT_TRUE(none.chat.tools.is_null());
  const MessagesRequest format = parse_messages_request(
      body(R"("output_config":{"format":{"type":"json_schema","schema":{"type":"object","required":["a"]}}})"), limits(), false);
  EXPECT_EQ(format.chat.response_format,
            Json::parse(R"({"type":"json_schema","json_schema":{"name":"output","schema":{"type":"object","required":["a"]}}})"));
}

// What Claude Code sends: system messages inside `messages` (also between a
// call and its result), and context_management clearing older thinking.
TEST(AnthropicRequest, MidConversationSystemMessagesAndClearedThinking) {
  const std::string turns =
      R"([{"role":"user","content":"a"},)"
      R"({"role":"assistant","content":[{"type":"thinking","thinking":"t1","signature":""},{"type":"text","text":"b"}]},)"
      R"({"role":"user","content":"c"},)"
      R"({"role":"assistant","content":[{"type":"thinking","thinking":"t2","signature":""},)"
      R"({"type":"tool_use","id":"u1","name":"f","input":{}}]},)"
      R"({"role":"system","content":[{"type":"text","text":"reminder"}]},)"
      R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"u1","content":"ok"}]},)"
      R"({"role":"system","content":"last words"}])";
  const auto reasoning_of = [](const Json& messages) {
    std::vector<std::string> out;
    for (const Json& m : messages)
      if (m["role"] == "assistant") out.push_back(m.value("reasoning_content", std::string("-")));
    return out;
  };
  const std::string tools = R"("tools":[{"name":"f","input_schema":{}}])";
  const MessagesRequest kept = parse_messages_request(msgs(turns, tools), limits(), false);
  EXPECT_EQ(reasoning_of(kept.chat.messages), (std::vector<std::string>{"t1", "t2"}));
  EXPECT_EQ(kept.chat.messages[4], Json::parse(R"({"role":"system","content":[{"type":"text","text":"reminder"}]})"));
  EXPECT_EQ(kept.chat.messages[5], Json::parse(R"({"role":"tool","tool_call_id":"u1","name":"f","content":"ok"})"));
  EXPECT_EQ(kept.chat.messages.back(), Json::parse(R"({"role":"system","content":"last words"})"));
  const struct {
    std::string edit;
    std::vector<std::string> reasoning;
  } cases[] = {
      {R"({"type":"clear_thinking_20251015","keep":"all"})", {"t1", "t2"}},
      {R"({"type":"clear_thinking_20251015","keep":{"type":"all"}})", {"t1", "t2"}},
      {R"({"type":"clear_thinking_20251015"})", {"-", "t2"}},
      {R"({"type":"clear_thinking_20251015","keep":{"type":"thinking_turns","value":0}})", {"-", "-"}},
      {R"({"type":"clear_thinking_20251015","keep":{"type":"thinking_turns","value":2}})", {"t1", "t2"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.edit);
    const MessagesRequest m = parse_messages_request(
        msgs(turns, tools + R"(,"context_management":{"edits":[)" + c.edit + "]}"), limits(), false);
    EXPECT_EQ(reasoning_of(m.chat.messages), c.reasoning);
    ChatOptions o;
    o.tools = nlohmann::json::parse(m.chat.tools.dump());
    EXPECT_NO_THROW((void)render_chat(m.chat.messages, o));
  }
}

TEST(AnthropicRequest, CountTokensTakesTheBodyWithoutMaxTokens) {
  const MessagesRequest m = parse_messages_request(
      R"({"model":"k3","system":"s","messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":1024}})",
      limits(), true);
  EXPECT_FALSE(m.chat.max_tokens.has_value());
  EXPECT_TRUE(m.chat.thinking);
  EXPECT_EQ(m.chat.messages.size(), 2u);
}

}  // namespace
}  // namespace deltafin::api
