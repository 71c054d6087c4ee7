// The Anthropic Messages API end to end, in process (Engine + ApiServer on a
// free port, raw-socket client): prompts reach the family's template
// exactly, answers are the chat route's answers in Anthropic's blocks,
// streamed events rebuild the whole message, a scripted model's tool calls
// make real tool_use round trips, stop sequences, errors in Anthropic's
// shape, and pings while a stream waits in the queue or behind a slow
// prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "model/kimi_k3/chat/chat_encode.h"
#include "model/kimi_k3/chat/chat_template.h"
#include "server/in_process_server.h"

namespace deltafin {
namespace {

using test::HttpConnection;
using test::HttpResponse;
using test::http_call;
using test::http_request_text;
using test::post;
using test::scripted_qwen3;
using test::TestServer;
using json = nlohmann::ordered_json;

LoadedK3& model() { return test::shared_tiny_model(11); }

json messages_body(const json& messages, int max_tokens, const json& extra = json::object()) {
  json j = {{"model", "tiny"}, {"max_tokens", max_tokens}, {"messages", messages}};
  j.update(extra);
  return j;
}

const json kHi = json::array({{{"role", "user"}, {"content", "Hi there"}}});

// A streamed message as its events: the name of each (from its data's type)
// and the message the SDKs would rebuild from them.
struct StreamedMessage {
  std::vector<std::string> events;  // in order, pings included
  json message;
};
StreamedMessage read_stream(HttpConnection& c) {
  StreamedMessage s;
  std::string partial;
  while (std::optional<std::string> e = c.next_event()) {
    const json j = json::parse(*e);
    const std::string type = j["type"];
    s.events.push_back(type);
    if (type == "message_start") s.message = j["message"];
    if (type == "content_block_start") s.message["content"].push_back(j["content_block"]);
    if (type == "content_block_delta") {
      json& block = s.message["content"][j["index"].get<size_t>()];
      const json& d = j["delta"];
      if (d["type"] == "text_delta") block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      if (d["type"] == "thinking_delta") block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      if (d["type"] == "input_json_delta") partial += d["partial_json"].get<std::string>();
    }
    if (type == "content_block_stop") {
      json& block = s.message["content"][j["index"].get<size_t>()];
      if (block["type"] == "tool_use") block["input"] = json::parse(partial);
      partial.clear();
    }
    if (type == "message_delta") {
      s.message["stop_reason"] = j["delta"]["stop_reason"];
      s.message["stop_sequence"] = j["delta"]["stop_sequence"];
      s.message["usage"] = j["usage"];
    }
    if (type == "message_stop" || type == "error") break;
  }
  return s;
}

StreamedMessage stream_messages(int port, const json& body) {
  HttpConnection c(port);
  json b = body;
  b["stream"] = true;
  EXPECT_TRUE(c.send(http_request_text("POST", "/v1/messages", b.dump())));
  HttpResponse head;
  EXPECT_TRUE(c.read_head(head));
  EXPECT_EQ(head.status, 200) << head.body;
  return read_stream(c);
}

// The events in order, pings aside: message_start, each block's start,
// deltas and stop, message_delta, message_stop.
void expect_event_grammar(const std::vector<std::string>& events) {
  std::vector<std::string> e;
  for (const std::string& name : events)
    if (name != "ping") e.push_back(name);
  ASSERT_GE(e.size(), 3u);
  EXPECT_EQ(e.front(), "message_start");
  EXPECT_EQ(e[e.size() - 2], "message_delta");
  EXPECT_EQ(e.back(), "message_stop");
  bool open = false;
  for (size_t i = 1; i + 2 < e.size(); ++i) {
    if (e[i] == "content_block_start") {
      EXPECT_FALSE(open) << "event " << i;
      open = true;
    } else if (e[i] == "content_block_delta") {
      EXPECT_TRUE(open) << "event " << i;
    } else {
      EXPECT_EQ(e[i], "content_block_stop") << "event " << i;
      EXPECT_TRUE(open) << "event " << i;
      open = false;
    }
  }
  EXPECT_FALSE(open);
}

// The prompt of a Messages request is the template's rendering of the
// conversation written by hand in the chat form: a completion of those ids
// leaves a prompt state that the Messages request reuses for all but its
// last position, which happens only for the very same ids; count_tokens
// counts them.
TEST(AnthropicHttp, PromptsAreTheTemplatesTokensForTheSameConversation) {
  TestServer server;
  const json tools = json::parse(R"([{"name":"get_weather","description":"Weather now","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}])");
  const json conversation = json::parse(R"([
    {"role":"user","content":"Weather in Paris?"},
    {"role":"assistant","content":[{"type":"thinking","thinking":"A call.","signature":""},{"type":"text","text":"Checking."},
                                   {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"Sunny"},{"type":"text","text":"Thanks."}]}])");
  const json chat_form = json::parse(R"([
    {"role":"system","content":"Be brief."},
    {"role":"user","content":"Weather in Paris?"},
    {"role":"assistant","reasoning_content":"A call.","content":"Checking.",
     "tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
    {"role":"tool","tool_call_id":"toolu_1","content":"Sunny"},
    {"role":"user","content":"Thanks."}])");
  const json openai_tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");
  struct Case {
    const char* what;
    json extra;
    ChatOptions options;
    bool generate = true;  // a budget needs max_tokens above it: counted only
  };
  auto options = [&](bool thinking, const char* effort, const nlohmann::json& choice) {
    ChatOptions o;
    o.thinking = thinking;
    o.reasoning_effort = effort;
    o.tools = nlohmann::json::parse(openai_tools.dump());
    o.tool_choice = choice;
    return o;
  };
  const std::vector<Case> cases = {
      {"thinking off (the default)", {{"system", "Be brief."}, {"tools", tools}}, options(false, "max", nullptr)},
      {"a thinking budget", {{"system", "Be brief."}, {"tools", tools}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 2000}}}},
       options(true, "low", nullptr), false},
      {"tool_choice any, effort high",
       {{"system", json::array({{{"type", "text"}, {"text", "Be brief."}}})},
        {"tools", tools},
        {"tool_choice", {{"type", "any"}}},
        {"thinking", {{"type", "adaptive"}}},
        {"output_config", {{"effort", "high"}}}},
       options(true, "high", "required")},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::vector<uint32_t> ids = encode_chat_segments(*model().tokenizer, render_chat(chat_form, c.options));
    json counted_body = json({{"model", "tiny"}, {"messages", conversation}});
    counted_body.update(c.extra);
    const HttpResponse count = post(server.port(), "/v1/messages/count_tokens", counted_body.dump());
    ASSERT_EQ(count.status, 200) << count.body;
    EXPECT_EQ(count.json(), nlohmann::json({{"input_tokens", ids.size()}}));
    if (!c.generate) continue;

    const HttpResponse warm = post(server.port(), "/v1/completions",
                                   json({{"model", "tiny"}, {"prompt", ids}, {"max_tokens", 1}}).dump());
    ASSERT_EQ(warm.status, 200) << warm.body;
    const HttpResponse answer = post(server.port(), "/v1/messages", messages_body(conversation, 4, c.extra).dump());
    ASSERT_EQ(answer.status, 200) << answer.body;
    const nlohmann::json usage = answer.json()["usage"];
    EXPECT_EQ(usage["cache_read_input_tokens"], ids.size() - 1) << usage;
    EXPECT_EQ(usage["input_tokens"], 1) << usage;
  }
}

// The same prompt on both routes gets the same answer: the chat route's
// reasoning is the thinking block, its content the text block, and its
// "length" is "max_tokens"; the stream rebuilds the whole message.
TEST(AnthropicHttp, AnswersAreTheChatRoutesAnswerInBlocksStreamedAndNot) {
  TestServer server;
  const HttpResponse chat = post(server.port(), "/v1/chat/completions",
                                 json({{"model", "tiny"}, {"messages", kHi}, {"max_tokens", 24}}).dump());
  ASSERT_EQ(chat.status, 200) << chat.body;
  const nlohmann::json choice = chat.json()["choices"][0];
  ASSERT_EQ(choice["finish_reason"], "length");

  const json body = messages_body(kHi, 24, {{"thinking", {{"type", "adaptive"}}}});
  const HttpResponse whole = post(server.port(), "/v1/messages", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json m = json::parse(whole.body);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], "tiny");
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  EXPECT_TRUE(m["stop_sequence"].is_null());
  std::string thinking, text;
  for (const json& block : m["content"]) {
    if (block["type"] == "thinking") thinking += block["thinking"].get<std::string>();
    if (block["type"] == "text") text += block["text"].get<std::string>();
  }
  EXPECT_EQ(thinking, choice["message"].value("reasoning_content", std::string()));
  EXPECT_EQ(text, choice["message"]["content"].is_null() ? "" : choice["message"]["content"].get<std::string>());
  EXPECT_EQ(m["usage"]["output_tokens"].get<int64_t>(), chat.json()["usage"]["completion_tokens"].get<int64_t>());
  EXPECT_EQ(m["usage"]["input_tokens"].get<int64_t>() + m["usage"]["cache_read_input_tokens"].get<int64_t>(),
            chat.json()["usage"]["prompt_tokens"].get<int64_t>());

  const StreamedMessage s = stream_messages(server.port(), body);
  expect_event_grammar(s.events);
  json streamed = s.message, expected = m;
  for (json* j : {&streamed, &expected}) j->erase("id"), (*j)["usage"].erase("input_tokens"), (*j)["usage"].erase("cache_read_input_tokens");
  EXPECT_EQ(streamed, expected);
}

const json kWeatherTools = json::parse(R"([{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}])");

// The scripted checkpoints start their script after Qwen3's generation
// prompt as it ends with thinking on ("<|im_start|>assistant\n"); with
// thinking off the template closes an empty think block after it.
const json kThinking = {{"type", "adaptive"}};

// A model that answers with a call: a tool_use block with its input as an
// object, stop_reason tool_use, the same streamed; the client's next turn
// (the call, its result) is accepted and answered.
TEST(AnthropicHttp, AScriptedModelsToolCallIsAToolUseRoundTrip) {
  test::TempDir dir;
  std::unique_ptr<LoadedModel> lm = scripted_qwen3(
      dir, {"<tool_call>", R"({"name": "get_weather", "arguments": {"city": "Paris", "days": 2}})", "</tool_call>", "<|im_end|>"});
  TestServer s({}, {}, lm.get());
  const json ask = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  const json body = messages_body(ask, 32, {{"tools", kWeatherTools}, {"thinking", kThinking}});
  const HttpResponse whole = post(s.port(), "/v1/messages", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json m = json::parse(whole.body);
  EXPECT_EQ(m["stop_reason"], "tool_use");
  ASSERT_EQ(m["content"].size(), 1u) << m;
  const json use = m["content"][0];
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_EQ(use["name"], "get_weather");
  EXPECT_EQ(use["input"], json::parse(R"({"city": "Paris", "days": 2})"));
  EXPECT_EQ(use["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(m["usage"]["output_tokens"], 3);

  const StreamedMessage streamed = stream_messages(s.port(), body);
  expect_event_grammar(streamed.events);
  ASSERT_EQ(streamed.message["content"].size(), 1u);
  EXPECT_EQ(streamed.message["content"][0]["input"], use["input"]);
  EXPECT_EQ(streamed.message["stop_reason"], "tool_use");

  json history = ask;
  history.push_back({{"role", "assistant"}, {"content", m["content"]}});
  history.push_back({{"role", "user"},
                     {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", use["id"]}, {"content", "Sunny, 21 C"}}})}});
  const HttpResponse next = post(s.port(), "/v1/messages", messages_body(history, 32, {{"tools", kWeatherTools}, {"thinking", kThinking}}).dump());
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_GT(next.json()["usage"]["input_tokens"].get<int64_t>() + next.json()["usage"]["cache_read_input_tokens"].get<int64_t>(),
            m["usage"]["input_tokens"].get<int64_t>());
  EXPECT_EQ(next.json()["stop_reason"], "tool_use");
}

// Markup the model gets wrong reaches the client as text, whole: arguments
// that are not JSON, and a block never closed.
TEST(AnthropicHttp, AScriptedModelsMalformedCallsAreShownAsText) {
  for (const auto& [script, shown] : test::malformed_call_scripts()) {
    SCOPED_TRACE(shown);
    test::TempDir dir;
    std::unique_ptr<LoadedModel> lm = scripted_qwen3(dir, script);
    TestServer s({}, {}, lm.get());
    const json body = messages_body(kHi, 32, {{"tools", kWeatherTools}, {"thinking", kThinking}});
    const HttpResponse r = post(s.port(), "/v1/messages", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json m = json::parse(r.body);
    EXPECT_EQ(m["stop_reason"], "end_turn");
    EXPECT_EQ(m["content"], json::array({{{"type", "text"}, {"text", shown}}}));
    const StreamedMessage streamed = stream_messages(s.port(), body);
    EXPECT_EQ(streamed.message["content"], m["content"]);
    EXPECT_EQ(streamed.message["stop_reason"], "end_turn");
  }
}

TEST(AnthropicHttp, AStopSequenceEndsTheTurnAndIsNamed) {
  test::TempDir dir;
  std::unique_ptr<LoadedModel> lm = scripted_qwen3(dir, {"Hello", " world", " again", "<|im_end|>"});
  TestServer s({}, {}, lm.get());
  const json body = messages_body(kHi, 32, {{"stop_sequences", {"zzz", "wor"}}, {"thinking", kThinking}});
  const HttpResponse r = post(s.port(), "/v1/messages", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = json::parse(r.body);
  EXPECT_EQ(m["content"], json::array({{{"type", "text"}, {"text", "Hello "}}}));
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "wor");
  const StreamedMessage streamed = stream_messages(s.port(), body);
  EXPECT_EQ(streamed.message["stop_reason"], "stop_sequence");
  EXPECT_EQ(streamed.message["stop_sequence"], "wor");
  EXPECT_EQ(streamed.message["content"], m["content"]);

  const HttpResponse plain = post(s.port(), "/v1/messages", messages_body(kHi, 32, {{"thinking", kThinking}}).dump());
  EXPECT_EQ(json::parse(plain.body)["content"], json::array({{{"type", "text"}, {"text", "Hello world again"}}}));
  EXPECT_EQ(json::parse(plain.body)["stop_reason"], "end_turn");
}

bool is_anthropic_error(const HttpResponse& r, const std::string& type) {
  const json j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.size() == 2 && j["type"] == "error" && j["error"].size() == 2 && j["error"]["type"] == type &&
         j["error"]["message"].is_string() && !j["error"]["message"].get<std::string>().empty();
}

TEST(AnthropicHttp, ErrorsAreAnthropicShapedAndEitherKeyHeaderWorks) {
  ServerOptions o;
  o.api_keys = {"sekret"};
  TestServer s({}, o);
  const std::string good = messages_body(kHi, 2).dump();
  const std::vector<std::pair<std::string, std::string>> x_key = {{"x-api-key", "sekret"}, {"anthropic-version", "2023-06-01"}};

  HttpResponse r = post(s.port(), "/v1/messages", good);
  EXPECT_EQ(r.status, 401);
  EXPECT_TRUE(is_anthropic_error(r, "authentication_error")) << r.body;
  r = post(s.port(), "/v1/messages", good, {{"x-api-key", "wrong"}});
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("x-api-key"), std::string::npos) << r.body;
  EXPECT_EQ(post(s.port(), "/v1/messages", good, x_key).status, 200);
  EXPECT_EQ(post(s.port(), "/v1/messages", good, {{"Authorization", "Bearer sekret"}}).status, 200);
  // The OpenAI routes take the x-api-key header too, and keep their shape.
  r = post(s.port(), "/v1/chat/completions", json({{"model", "tiny"}, {"messages", kHi}, {"max_tokens", 2}}).dump(), x_key);
  EXPECT_EQ(r.status, 200) << r.body;
  r = post(s.port(), "/v1/chat/completions", json({{"model", "tiny"}, {"messages", kHi}}).dump());
  EXPECT_TRUE(test::is_openai_error(nlohmann::json::parse(r.body))) << r.body;

  r = post(s.port(), "/v1/messages", json({{"model", "claude-sonnet-5"}, {"max_tokens", 2}, {"messages", kHi}}).dump(), x_key);
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(is_anthropic_error(r, "not_found_error")) << r.body;
  r = post(s.port(), "/v1/messages", messages_body(kHi, 2, {{"temperature", 0.7}}).dump(), x_key);
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(is_anthropic_error(r, "invalid_request_error")) << r.body;
  EXPECT_NE(r.body.find("temperature"), std::string::npos) << r.body;
  r = post(s.port(), "/v1/messages", "{\"model\": ", x_key);
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(is_anthropic_error(r, "invalid_request_error")) << r.body;
  r = http_call(s.port(), "GET", "/v1/messages", std::nullopt, x_key);
  EXPECT_EQ(r.status, 405);
  EXPECT_TRUE(is_anthropic_error(r, "invalid_request_error")) << r.body;
  r = post(s.port(), "/v1/messages/count_tokens", json({{"model", "tiny"}, {"messages", kHi}, {"stream", true}}).dump(), x_key);
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(is_anthropic_error(r, "invalid_request_error")) << r.body;
  // A prompt over the context: refused, but count_tokens still counts it.
  const json long_chat = json::array({{{"role", "user"}, {"content", std::string(6000, 'x') + " end"}}});
  EngineSettings small;
  small.context_limit = 256;
  TestServer tight(small);
  r = post(tight.port(), "/v1/messages", messages_body(long_chat, 2).dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(is_anthropic_error(r, "invalid_request_error")) << r.body;
  r = post(tight.port(), "/v1/messages/count_tokens", json({{"model", "tiny"}, {"messages", long_chat}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GT(json::parse(r.body)["input_tokens"].get<int64_t>(), 256);
}

// A streamed request waiting in the queue has its 200 and ping events at
// once, then its message as when served alone.
TEST(AnthropicHttp, AQueuedStreamGetsPingsWhileItWaits) {
  const json body = messages_body(kHi, 4);
  json alone;
  {
    TestServer solo;
    alone = json::parse(post(solo.port(), "/v1/messages", body.dump()).body);
  }
  EngineSettings so;
  ServerOptions o;
  o.keepalive_ms = 30;
  TestServer s(so, o);
  s.service().set_test_hooks({.step_delay_ms = 20});  // tests only: slow the generation down
  HttpConnection busy(s.port());
  ASSERT_TRUE(busy.send(http_request_text("POST", "/v1/completions",
                                          json({{"model", "tiny"}, {"prompt", "Hello"}, {"max_tokens", 3000}, {"stream", true}}).dump())));
  HttpResponse head;
  ASSERT_TRUE(busy.read_head(head));
  ASSERT_TRUE(busy.next_event().has_value());

  HttpConnection queued(s.port());
  json streamed_body = body;
  streamed_body["stream"] = true;
  ASSERT_TRUE(queued.send(http_request_text("POST", "/v1/messages", streamed_body.dump())));
  HttpResponse queued_head;
  ASSERT_TRUE(queued.read_head(queued_head));  // while the busy one still generates
  EXPECT_EQ(queued_head.status, 200);
  EXPECT_EQ(queued_head.header("content-type"), "text/event-stream");
  for (int i = 0; i < 3; ++i) {
    const std::optional<std::string> e = queued.next_event();
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(json::parse(*e), json({{"type", "ping"}})) << "event " << i;
  }
  EXPECT_EQ(s.health()["waiting"], 1);
  busy.close();
  const StreamedMessage m = read_stream(queued);
  expect_event_grammar(m.events);
  json got = m.message, want = alone;
  for (json* j : {&got, &want}) j->erase("id"), (*j)["usage"].erase("input_tokens"), (*j)["usage"].erase("cache_read_input_tokens");
  EXPECT_EQ(got, want);
}

// Behind a long prefill a stream is never silent for longer than the
// keep-alive interval plus one layer of one pass: at each of the engine's
// stop checks (after each layer's progress report) the server pings, with
// the prefill's progress as a comment, once the interval has passed since
// its last write. Here the interval (1 ms) is shorter than the delay
// injected at each progress report (2 ms), so every report is followed by a
// ping that carries it: the comments name every layer of every 16-position
// pass, in order, before the first content block. (How long a real layer
// takes is the prefill's speed: a benchmark's business, not this test's.)
TEST(AnthropicHttp, ALongPrefillPingsAfterEveryLayer) {
  std::string prompt;
  for (int i = 0; i < 70; ++i) prompt += "word" + std::to_string(i) + " ";
  EngineSettings so;
  so.prompt_cache_entries = 0;
  so.prefill_group = 16;
  ServerOptions o;
  o.keepalive_ms = 1;
  TestServer s(so, o);
  s.service().set_test_hooks({.prefill_delay_ms = 2});  // tests only: slow the generation down
  HttpConnection c(s.port());
  const json body = messages_body(json::array({{{"role", "user"}, {"content", prompt}}}), 2, {{"stream", true}});
  ASSERT_TRUE(c.send(http_request_text("POST", "/v1/messages", body.dump())));
  HttpResponse head;
  ASSERT_TRUE(c.read_head(head));
  ASSERT_EQ(head.status, 200);
  size_t pings = 0, comments_before_block = 0;
  bool block = false;
  while (std::optional<std::string> e = c.next_event()) {
    const std::string type = json::parse(*e)["type"];
    if (type == "content_block_start" && !block) {
      block = true;
      comments_before_block = c.comments().size();
    }
    if (type == "ping" && !block) ++pings;
    if (type == "message_stop") break;
  }
  ASSERT_TRUE(block);
  // The progress comments before the first block, in order.
  std::vector<int64_t> done;
  int64_t total = -1;
  for (size_t i = 0; i < comments_before_block; ++i) {
    long long d = -1, t = -1;
    if (std::sscanf(c.comments()[i].c_str(), ": prefill %lld/%lld", &d, &t) != 2) continue;
    if (total < 0) total = t;
    EXPECT_EQ(t, total) << c.comments()[i];
    done.push_back(d);
  }
  ASSERT_GT(total, 64) << "the prompt should take several passes";
  // What the engine reports (engine/prefill.cpp): pass at = 0, 16, ... of
  // len positions, layer l of L: at + len * l / L.
  const int64_t layers = model().causal().summary().layers;
  std::vector<int64_t> reports;
  for (int64_t at = 0; at < total; at += 16) {
    const int64_t len = std::min<int64_t>(16, total - at);
    for (int64_t l = 0; l < layers; ++l) reports.push_back(at + len * l / layers);
  }
  std::printf("[ pings    ] a prefill of %lld positions: %zu layer reports, %zu progress comments, %zu pings\n",
              static_cast<long long>(total), reports.size(), done.size(), pings);
  // Each report is among the comments, in order (a stop check between two
  // reports may add a ping that repeats the last one).
  size_t next = 0;
  for (int64_t d : done)
    if (next < reports.size() && d == reports[next]) ++next;
  EXPECT_EQ(next, reports.size()) << "no ping after the report of pass " << reports[std::min(next, reports.size() - 1)]
                                  << " (report " << next << " of " << reports.size() << ")";
  EXPECT_GE(pings, reports.size());
  EXPECT_TRUE(std::is_sorted(done.begin(), done.end()));
}

}  // namespace
}  // namespace deltafin
