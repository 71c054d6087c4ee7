// Anthropic answer shapes (server/api/anthropic_format.h): the content blocks
// built from an answer's pieces and the events that stream them, against
// sequences written out by hand, including calls that are not JSON objects.
#include "server/api/anthropic_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deltafin::api {
namespace {

using Json = nlohmann::ordered_json;

// "event: NAME\ndata: JSON\n\n" events -> [NAME, JSON] pairs, checking the framing.
std::vector<std::pair<std::string, Json>> events_of(const std::string& text) {
  std::vector<std::pair<std::string, Json>> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << text.substr(pos);
    if (end == std::string::npos) break;
    const std::string event = text.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = event.find('\n');
    EXPECT_EQ(event.rfind("event: ", 0), 0u) << event;
    EXPECT_EQ(event.compare(nl + 1, 6, "data: "), 0) << event;
    const std::string name = event.substr(7, nl - 7);
    const Json data = Json::parse(event.substr(nl + 7));
    EXPECT_EQ(data["type"], name) << event;  // Anthropic's events repeat their name as the type
    out.emplace_back(name, data);
  }
  return out;
}

ChatDelta reasoning(const std::string& s) { return {s, "", {}}; }
ChatDelta content(const std::string& s) { return {"", s, {}}; }
ChatDelta call(size_t index, bool begins, bool ends, const std::string& name, const std::string& arguments) {
  ChatDelta d;
  d.tool_calls.push_back({index, begins, ends, name, arguments});
  return d;
}

TEST(MessageBlocks, ThinkingTextAndACallStreamAsTheirBlocks) {
  MessageBlocks b("msg_7_3", true);
  std::string stream;
  stream += b.push(reasoning("Let me "));
  stream += b.push(reasoning("see."));
  stream += b.push(content("Checking."));
  stream += b.push(call(0, true, false, "get_weather", ""));
  stream += b.push(call(0, false, false, "", R"({"city": )"));
  stream += b.push(call(0, false, true, "", R"("Paris"})"));
  stream += b.finish();
  const Json expected_content = Json::parse(R"([
    {"type": "thinking", "thinking": "Let me see.", "signature": ""},
    {"type": "text", "text": "Checking."},
    {"type": "tool_use", "id": "toolu_7_3_0", "name": "get_weather", "input": {"city": "Paris"}}])");
  EXPECT_EQ(b.content(), expected_content);
  EXPECT_EQ(b.tool_uses(), 1u);

  const auto events = events_of(stream);
  const std::vector<Json> expected = {
      Json::parse(R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}})"),
      Json::parse(R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}})"),
      Json::parse(R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"see."}})"),
      Json::parse(R"({"type":"content_block_stop","index":0})"),
      Json::parse(R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})"),
      Json::parse(R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking."}})"),
      Json::parse(R"({"type":"content_block_stop","index":1})"),
      Json::parse(R"({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_7_3_0","name":"get_weather","input":{}}})"),
      Json::parse(R"({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Paris\"}"}})"),
      Json::parse(R"({"type":"content_block_stop","index":2})"),
  };
  ASSERT_EQ(events.size(), expected.size()) << stream;
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(events[i].second, expected[i]) << "event " << i;
}

// Arguments that are not a JSON object cannot be a tool_use block's input:
// the call is shown as text, whole; a call cut off by the end of the answer
// is judged by what it has.
TEST(MessageBlocks, ACallThatIsNotAnObjectIsShownAsText) {
  struct Case {
    std::vector<ChatDelta> pieces;
    Json content;
    size_t tool_uses;
  };
  const std::vector<Case> cases = {
      {{call(0, true, false, "f", "not json"), call(0, false, true, "", "")},
       Json::parse(R"([{"type":"text","text":"[tool call f: not json]"}])"), 0},
      {{call(0, true, false, "f", "[1, 2]"), call(0, false, true, "", ""), content("after")},
       Json::parse(R"([{"type":"text","text":"[tool call f: [1, 2]]"},{"type":"text","text":"after"}])"), 0},
      {{call(0, true, false, "f", R"({"a": 1)")}, Json::parse(R"([{"type":"text","text":"[tool call f: {\"a\": 1]"}])"), 0},
      {{call(0, true, false, "f", R"({"a": 1})")},
       Json::parse(R"([{"type":"tool_use","id":"toolu_1_1_0","name":"f","input":{"a":1}}])"), 1},
      {{call(0, true, true, "f", R"({"b": [1], "a": {}})"), call(1, true, true, "g", "{}")},
       Json::parse(R"([{"type":"tool_use","id":"toolu_1_1_0","name":"f","input":{"b":[1],"a":{}}},)"
                   R"({"type":"tool_use","id":"toolu_1_1_1","name":"g","input":{}}])"),
       2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.content.dump());
    MessageBlocks b("msg_1_1", true);
    std::string stream;
    for (const ChatDelta& d : c.pieces) stream += b.push(d);
    stream += b.finish();
    EXPECT_EQ(b.content(), c.content);
    EXPECT_EQ(b.tool_uses(), c.tool_uses);
    // The stream rebuilds the same blocks, as the SDKs rebuild them.
    Json rebuilt = Json::array();
    std::string partial;
    for (const auto& [name, e] : events_of(stream)) {
      if (name == "content_block_start") rebuilt.push_back(e["content_block"]);
      if (name == "content_block_delta" && e["delta"]["type"] == "text_delta")
        rebuilt.back()["text"] = rebuilt.back()["text"].get<std::string>() + e["delta"]["text"].get<std::string>();
      if (name == "content_block_delta" && e["delta"]["type"] == "input_json_delta")
        partial += e["delta"]["partial_json"].get<std::string>();
      if (name == "content_block_stop" && rebuilt.back()["type"] == "tool_use") {
        rebuilt.back()["input"] = Json::parse(partial);
        partial.clear();
      }
    }
    EXPECT_EQ(rebuilt, c.content);
  }
}

TEST(MessageBlocks, OmittedThinkingKeepsTheBlockButNotItsText) {
  MessageBlocks b("msg_1_1", false);
  std::string stream = b.push(reasoning("secret"));
  stream += b.push(content("answer"));
  stream += b.finish();
  EXPECT_EQ(b.content(), Json::parse(R"([{"type":"thinking","thinking":"","signature":""},{"type":"text","text":"answer"}])"));
  EXPECT_EQ(stream.find("secret"), std::string::npos);
}

TEST(AnthropicFormat, UsageCountsReusedPromptTokensAsCacheReads) {
  MessageUsage u;
  u.prompt_tokens = 120;
  u.cached_tokens = 100;
  u.output_tokens = 7;
  u.thinking_tokens = 3;
  EXPECT_EQ(message_usage(u), Json::parse(R"({"input_tokens":20,"output_tokens":7,"cache_creation_input_tokens":0,)"
                                          R"("cache_read_input_tokens":100,"output_tokens_details":{"thinking_tokens":3}})"));
}

TEST(AnthropicFormat, ErrorsTakeAnthropicsTypes) {
  const std::vector<std::pair<int, std::string>> cases = {{400, "invalid_request_error"}, {401, "authentication_error"},
                                                          {404, "not_found_error"},       {413, "request_too_large"},
                                                          {429, "rate_limit_error"},      {503, "overloaded_error"},
                                                          {500, "api_error"},             {415, "invalid_request_error"}};
  for (const auto& [status, type] : cases) {
    const Json e = anthropic_error(ApiError(status, "why", "p", "c"));
    EXPECT_EQ(e, Json({{"type", "error"}, {"error", {{"type", type}, {"message", "why"}}}})) << status;
  }
}

}  // namespace
}  // namespace deltafin::api
