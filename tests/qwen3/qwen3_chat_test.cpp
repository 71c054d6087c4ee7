// Qwen3's chat format (model/qwen3/qwen3_chat.h) on the generated tokenizer:
// every rendering equals the Qwen3 chat template's output, written out here
// by hand from the template, tokenized whole by the tokenizer (as
// transformers' apply_chat_template does); and the answer parser splits
// <think> blocks into reasoning and content with the template's newline
// rules, token by token.
#include "model/qwen3/qwen3_chat.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "model/qwen3/qwen3_generator.h"
#include "support/test_support.h"
#include "util/error.h"

namespace deltafin {
namespace {

using Json = nlohmann::ordered_json;
using Ids = std::vector<uint32_t>;

struct Fixture {
  test::TempDir dir;
  std::unique_ptr<HfTokenizer> tok;
  std::unique_ptr<TokenText> text;
  std::unique_ptr<Qwen3ChatFormat> chat;
  Qwen3ChatTokens ids;
  Fixture() {
    Qwen3GenerateOptions o;
    o.out_dir = dir.path();
    o.vocab = 400;
    generate_qwen3_checkpoint(o);
    tok = std::make_unique<HfTokenizer>(HfTokenizer::load(dir.file("tokenizer.json")));
    text = token_text(*tok);
    std::string why;
    ids = *qwen3_chat_tokens(*tok, &why);
    chat = std::make_unique<Qwen3ChatFormat>(*tok, *text, ids);
  }
};

Fixture& fx() {
  static Fixture f;
  return f;
}

// The template's text tokenized whole, added tokens recognised.
Ids whole(const std::string& rendered) { return fx().tok->encode(rendered, true); }

Ids render(const Json& messages, bool thinking = true) {
  ChatTurnOptions o;
  o.thinking = thinking;
  return fx().chat->render(messages, o).tokens;
}

Json msg(const std::string& role, const std::string& content) { return Json{{"role", role}, {"content", content}}; }

TEST(Qwen3Chat, GeneratedTokenizerHasTheChatTokensAfterTheSpecials) {
  // 400 ids: 391 BPE tokens, then <|endoftext|>, <|im_start|>, <|im_end|>,
  // <tool_call>, </tool_call>, <tool_response>, </tool_response>, <think>, </think>.
  EXPECT_EQ(fx().ids.im_start, 392u);
  EXPECT_EQ(fx().ids.im_end, 393u);
  EXPECT_EQ(fx().ids.tool_call, 394u);
  EXPECT_EQ(fx().ids.end_tool_call, 395u);
  EXPECT_EQ(fx().ids.tool_response, 396u);
  EXPECT_EQ(fx().ids.end_tool_response, 397u);
  EXPECT_EQ(fx().ids.think, 398u);
  EXPECT_EQ(fx().ids.end_think, 399u);
  EXPECT_EQ(fx().chat->end_tokens(), (std::vector<uint32_t>{393u, 391u}));  // <|im_end|>, <|endoftext|>
}

TEST(Qwen3Chat, SystemAndUserWithThinkingOnEndsAtTheAssistantHeader) {
  const Json m = Json::array({msg("system", "You are terse."), msg("user", "Hi there")});
  EXPECT_EQ(render(m), whole("<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                             "<|im_start|>assistant\n"));
  EXPECT_FALSE(fx().chat->render(m, {}).thinking);  // the model opens its own <think>
}

TEST(Qwen3Chat, ThinkingOffAppendsAnEmptyThinkBlock) {
  const Json m = Json::array({msg("user", "Hi there")});
  EXPECT_EQ(render(m, false),
            whole("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
}

TEST(Qwen3Chat, HistoryBeforeTheLastUserMessageDropsItsReasoning) {
  Json a1 = msg("assistant", "It is 4.");
  a1["reasoning_content"] = "2 and 2 make 4.";
  const Json m = Json::array({msg("user", "2+2?"), a1,
                              msg("assistant", "<think>\nMore thought.\n</think>\n\nAnd 5 is next."), msg("user", "Next?")});
  EXPECT_EQ(render(m), whole("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\nIt is 4.<|im_end|>\n"
                             "<|im_start|>assistant\nAnd 5 is next.<|im_end|>\n<|im_start|>user\nNext?<|im_end|>\n"
                             "<|im_start|>assistant\n"));
}

TEST(Qwen3Chat, TurnsAfterTheLastUserMessageKeepTheirReasoning) {
  // An assistant turn after the last user message (a continued answer):
  // its reasoning is kept, newlines stripped as the template strips them.
  Json a = msg("assistant", "\nThe sum is 4.");
  a["reasoning_content"] = "\n\nAdd them.\n";
  const Json m = Json::array({msg("user", "2+2?"), a});
  EXPECT_EQ(render(m), whole("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nAdd them.\n</think>\n\n"
                             "The sum is 4.<|im_end|>\n<|im_start|>assistant\n"));
  // Not the last message and without reasoning: no think block.
  const Json m2 = Json::array({msg("user", "a"), msg("assistant", "b"), msg("assistant", "c")});
  EXPECT_EQ(render(m2), whole("<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n"
                              "<|im_start|>assistant\n<think>\n\n</think>\n\nc<|im_end|>\n<|im_start|>assistant\n"));
}

TEST(Qwen3Chat, ALaterSystemMessageRendersLikeAUserOne) {
  const Json m = Json::array({msg("user", "a"), msg("system", "Be brief."), msg("user", "b")});
  EXPECT_EQ(render(m), whole("<|im_start|>user\na<|im_end|>\n<|im_start|>system\nBe brief.<|im_end|>\n"
                             "<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n"));
}

TEST(Qwen3Chat, TextPartsAreJoinedWithNewlines) {
  const Json parts = Json::array({{{"type", "text"}, {"text", "one"}}, {{"type", "text"}, {"text", "two"}}});
  const Json m = Json::array({Json{{"role", "user"}, {"content", parts}}});
  EXPECT_EQ(render(m), whole("<|im_start|>user\none\ntwo<|im_end|>\n<|im_start|>assistant\n"));
}

TEST(Qwen3Chat, AnAddedTokenSpelledInMessageTextStaysText) {
  const Json m = Json::array({msg("user", "say <|im_end|> and <think>")});
  const Ids got = render(m);
  // The template's own tokens only: one <|im_start|> per turn, one <|im_end|>, no <think>.
  EXPECT_EQ(std::count(got.begin(), got.end(), fx().ids.im_end), 1);
  EXPECT_EQ(std::count(got.begin(), got.end(), fx().ids.think), 0);
  EXPECT_EQ(fx().tok->decode(got), "<|im_start|>user\nsay <|im_end|> and <think><|im_end|>\n<|im_start|>assistant\n");
}

TEST(Qwen3Chat, UnknownRolesAreRefusedNamingTheMessage) {
  auto message_of = [](const Json& m) {
    try {
      render(m);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message_of(Json::array({msg("critic", "a")})).find("messages[0].role"), std::string::npos);
  EXPECT_NE(message_of(Json::array()).find("non-empty"), std::string::npos);
}

const char* const kToolsJson =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},)"
    R"( {"type": "function", "function": {"name": "now"}}])";

Ids render_tools(const Json& messages, const Json& tool_choice = nullptr) {
  ChatTurnOptions o;
  o.tools = Json::parse(kToolsJson);
  o.tool_choice = tool_choice;
  return fx().chat->render(messages, o).tokens;
}

// The template's tool path, written out by hand from the released template.
const std::string kToolsSystem =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})"
    "\n"
    R"({"type": "function", "function": {"name": "now"}})"
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n";

TEST(Qwen3Chat, ToolsGoIntoTheSystemTurnWithTheFirstSystemMessage) {
  EXPECT_EQ(render_tools(Json::array({msg("system", "Be brief."), msg("user", "Weather?")})),
            whole("<|im_start|>system\nBe brief.\n\n" + kToolsSystem + "<|im_start|>user\nWeather?<|im_end|>\n"
                  "<|im_start|>assistant\n"));
  EXPECT_EQ(render_tools(Json::array({msg("user", "Weather?")})),
            whole("<|im_start|>system\n" + kToolsSystem + "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"));
  // tool_choice "none": nothing is declared.
  EXPECT_EQ(render_tools(Json::array({msg("user", "Weather?")}), "none"),
            whole("<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"));
}

TEST(Qwen3Chat, ToolCallsAndToolResultsRenderAsTheTemplateWritesThem) {
  Json call = msg("assistant", "Checking.");
  call["tool_calls"] = Json::parse(
      R"([{"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},)"
      R"( {"id": "b", "type": "function", "function": {"name": "now", "arguments": {"tz": "UTC", "n": 1}}}])");
  Json bare = Json{{"role", "assistant"}, {"content", nullptr}};
  bare["tool_calls"] = Json::parse(R"([{"function": {"name": "now", "arguments": {}}}])");
  Json tool_a = msg("tool", "Sunny");
  tool_a["tool_call_id"] = "a";
  const Json m = Json::array({msg("user", "Weather?"), call, tool_a, msg("tool", "12:00"), bare, msg("tool", "13:00")});
  // Both assistant turns follow the last user message: they keep an (empty)
  // think block only when last or with reasoning, so neither has one.
  EXPECT_EQ(render_tools(m),
            whole("<|im_start|>system\n" + kToolsSystem + "<|im_start|>user\nWeather?<|im_end|>\n"
                  "<|im_start|>assistant\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"
                  "\n<tool_call>\n{\"name\": \"now\", \"arguments\": {\"tz\": \"UTC\", \"n\": 1}}\n</tool_call><|im_end|>\n"
                  "<|im_start|>user\n<tool_response>\nSunny\n</tool_response>\n<tool_response>\n12:00\n</tool_response><|im_end|>\n"
                  "<|im_start|>assistant\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
                  "<|im_start|>user\n<tool_response>\n13:00\n</tool_response><|im_end|>\n<|im_start|>assistant\n"));
}

TEST(Qwen3Chat, WhatTheTemplateCannotSayIsRefusedNamingTheField) {
  const Json m = Json::array({msg("user", "Weather?")});
  for (const Json& choice : {Json("required"), Json::parse(R"({"type": "function", "function": {"name": "now"}})")}) {
    try {
      render_tools(m, choice);
      ADD_FAILURE() << "rendered with tool_choice " << choice.dump();
    } catch (const ChatOptionError& e) {
      EXPECT_EQ(e.field(), "tool_choice");
    }
  }
  ChatTurnOptions o;
  o.response_format = Json{{"type", "json_object"}};
  try {
    fx().chat->render(m, o);
    ADD_FAILURE() << "rendered with a response_format";
  } catch (const ChatOptionError& e) {
    EXPECT_EQ(e.field(), "response_format.type");
  }
}

// Pushes `ids` through a fresh parser and gathers both channels.
struct Parsed {
  std::string reasoning, content;
  std::vector<ChatDelta> deltas;
  int64_t reasoning_tokens = 0;
};
Parsed parse(const Ids& ids) {
  Parsed p;
  auto out = fx().chat->output(false);
  for (uint32_t id : ids) {
    ChatDelta d = out->push(id);
    p.reasoning += d.reasoning;
    p.content += d.content;
    p.deltas.push_back(d);
  }
  ChatDelta d = out->flush();
  p.reasoning += d.reasoning;
  p.content += d.content;
  p.reasoning_tokens = out->reasoning_tokens();
  return p;
}

Ids text_ids(const std::string& s) { return fx().tok->encode(s, false); }

Ids cat_ids(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(Qwen3ChatOutput, SplitsAThinkBlockWithTheTemplatesNewlineRules) {
  const Ids reasoning = text_ids("\nAdd two and two.\n");
  const Ids answer = text_ids("\n\nIt is 4.");
  const Parsed p = parse(cat_ids({{fx().ids.think}, reasoning, {fx().ids.end_think}, answer}));
  EXPECT_EQ(p.reasoning, "Add two and two.");
  EXPECT_EQ(p.content, "It is 4.");
  // The tokens consumed inside the block, </think> among them.
  EXPECT_EQ(p.reasoning_tokens, static_cast<int64_t>(reasoning.size()) + 1);
}

TEST(Qwen3ChatOutput, InnerNewlinesSurviveAndNothingIsHeldBackForLong) {
  const Parsed p = parse(cat_ids({{fx().ids.think}, text_ids("a\n\nb\n"), {fx().ids.end_think}, text_ids("x\ny\n")}));
  EXPECT_EQ(p.reasoning, "a\n\nb");
  EXPECT_EQ(p.content, "x\ny\n");  // a trailing newline of the answer comes out at the end
  // No delta mixes the channels.
  for (const ChatDelta& d : p.deltas) EXPECT_TRUE(d.reasoning.empty() || d.content.empty());
}

TEST(Qwen3ChatOutput, AnAnswerWithoutThinkIsAllContent) {
  const Parsed p = parse(text_ids("Plain answer."));
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "Plain answer.");
  EXPECT_EQ(p.reasoning_tokens, 0);
  // An unclosed block keeps its text (the budget ran out mid-thought).
  const Parsed q = parse(cat_ids({{fx().ids.think}, text_ids("still thinking\n")}));
  EXPECT_EQ(q.reasoning, "still thinking\n");
  EXPECT_EQ(q.content, "");
}

TEST(Qwen3ChatOutput, OtherAddedTokensAreShownAsTheirSpelling) {
  const Parsed p = parse(cat_ids({text_ids("a"), {fx().ids.im_start}, text_ids("b")}));
  EXPECT_EQ(p.content, "a<|im_start|>b");
}

struct ParsedCalls {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  bool all_ended = true;
};
ParsedCalls parse_calls(const Ids& ids) {
  ParsedCalls r;
  auto out = fx().chat->output(false);
  auto add = [&](const ChatDelta& d) {
    r.content += d.content;
    for (const ToolCallDelta& c : d.tool_calls) {
      if (c.begins) {
        EXPECT_EQ(c.index, r.calls.size());
        r.calls.push_back({c.name, ""});
        r.all_ended = false;
      }
      r.calls.back().second += c.arguments;
      if (c.ends) r.all_ended = true;
    }
  };
  for (uint32_t id : ids) add(out->push(id));
  add(out->flush());
  return r;
}

TEST(Qwen3ChatOutput, AToolCallBlockBecomesACall) {
  const uint32_t open = *fx().ids.tool_call, close = *fx().ids.end_tool_call;
  const ParsedCalls r = parse_calls(cat_ids({text_ids("Checking."), text_ids("\n"), {open},
                                             text_ids("\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\",\"n\":[1,2]}}\n"),
                                             {close}, text_ids("\n"), {open}, text_ids("{\"name\": \"now\"}"), {close}}));
  EXPECT_EQ(r.content, "Checking.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].first, "get_weather");
  EXPECT_EQ(r.calls[0].second, R"({"city": "Paris", "n": [1, 2]})");
  EXPECT_EQ(r.calls[1].first, "now");
  EXPECT_EQ(r.calls[1].second, "{}");
  EXPECT_TRUE(r.all_ended);
}

TEST(Qwen3ChatOutput, AMalformedOrUnclosedBlockIsShownAsContent) {
  const uint32_t open = *fx().ids.tool_call, close = *fx().ids.end_tool_call;
  const ParsedCalls bad = parse_calls(cat_ids({{open}, text_ids("{\"name\": 3}"), {close}, text_ids(" ok")}));
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>{\"name\": 3}</tool_call> ok");
  const ParsedCalls cut = parse_calls(cat_ids({text_ids("a"), {open}, text_ids("{\"name\": \"f\"")}));
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "a<tool_call>{\"name\": \"f\"");
}

}  // namespace
}  // namespace deltafin
