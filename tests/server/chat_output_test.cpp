// ChatOutputParser on real K3-layout token ids (a hand-built vocabulary with
// K3's reserved tokens, turns encoded with encode_with_specials), and
// StopMatcher, all against hand-computed expectations.
#include "model/kimi_k3/chat_output.h"
#include "model/kimi_k3/chat/chat_template.h"
#include "server/api/stop_matcher.h"
#include "server/api/openai_format.h"
#include "server/api/turn_text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "format/tokenizer_config.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

namespace deltafin::api {
namespace {

using Ids = std::vector<uint32_t>;

const std::string kFffd = "\xef\xbf\xbd";

// Ranks 0..255 are the single bytes, then 256 "think", 257 "response",
// 258 "message", 259 "Let", 260 " me", 261 " think", 262 "The",
// 263 " answer". Reserved ids from 264 (k3_special_tokens): [BOS] 264,
// [EOS] 265, <|end_of_msg|> 266, <|open|> 267, <|close|> 268, <|sep|> 269.
constexpr uint32_t kBos = 264, kEos = 265, kOpen = 267, kClose = 268, kSep = 269;

const Tokenizer& tok() {
  static const Tokenizer t = [] {
    std::vector<std::string> ranks;
    for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
    for (const char* w : {"think", "response", "message", "Let", " me", " think", "The", " answer"})
      ranks.push_back(w);
    return Tokenizer::from_parts(ranks, k3_special_tokens(264));
  }();
  return t;
}

struct Result {
  std::string reasoning, content;
  int64_t reasoning_tokens = 0;
};

// Feeds `ids` one at a time, then flushes. Every delta must carry text in at
// most one channel.
Result feed(const Ids& ids, bool thinking) {
  K3ChatOutput p(tok(), thinking);
  Result r;
  auto add = [&](const ChatDelta& d) {
    EXPECT_TRUE(d.reasoning.empty() || d.content.empty()) << d.reasoning << " | " << d.content;
    r.reasoning += d.reasoning;
    r.content += d.content;
  };
  for (uint32_t id : ids) add(p.push(id));
  add(p.flush());
  r.reasoning_tokens = p.reasoning_tokens();
  return r;
}

Ids cat(Ids a, const Ids& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- ChatOutputParser -------------------------------------------------------

TEST(ChatOutputParser, TestTokenizerHasTheK3Layout) {
  EXPECT_EQ(tok().special_id("<|open|>"), kOpen);
  EXPECT_EQ(tok().special_id("<|close|>"), kClose);
  EXPECT_EQ(tok().special_id("<|sep|>"), kSep);
  EXPECT_EQ(tok().eos_id(), 266u);
  EXPECT_EQ(tok().token_bytes(kBos), "[BOS]");
  EXPECT_EQ(tok().token_bytes(kEos), "[EOS]");
}

TEST(ChatOutputParser, FullThinkingTurn) {
  const Ids ids = tok().encode_with_specials(
      "Let me think.<|close|>think<|sep|><|open|>response<|sep|>The answer."
      "<|close|>response<|sep|><|close|>message<|sep|>");
  // "Let" " me" " think" "." | close think sep | open response sep |
  // "The" " answer" "." | close response sep | close message sep.
  ASSERT_EQ(ids, (Ids{259, 260, 261, '.', kClose, 256, kSep, kOpen, 257, kSep, 262, 263, '.', kClose, 257, kSep,
                      kClose, 258, kSep}));
  Result r = feed(ids, /*thinking=*/true);
  EXPECT_EQ(r.reasoning, "Let me think.");
  EXPECT_EQ(r.content, "The answer.");
  // The four reasoning tokens and the three of close(think).
  EXPECT_EQ(r.reasoning_tokens, 7);
}

TEST(ChatOutputParser, StreamsTextAsSoonAsItIsKnown) {
  K3ChatOutput p(tok(), true);
  EXPECT_EQ(p.push(259).reasoning, "Let");
  EXPECT_TRUE(p.push(kClose).empty());  // a tag is held back...
  EXPECT_TRUE(p.push(256).empty());
  EXPECT_TRUE(p.push(kSep).empty());    // ...and close(think) is not shown
  EXPECT_TRUE(p.push(kOpen).empty());
  EXPECT_TRUE(p.push(257).empty());
  EXPECT_TRUE(p.push(kSep).empty());
  ChatDelta d = p.push(262);
  EXPECT_EQ(d.content, "The");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_TRUE(p.flush().empty());
  EXPECT_EQ(p.reasoning_tokens(), 4);
}

TEST(ChatOutputParser, NonThinkingTurnStartsInContent) {
  // The prompt ended with open(response): generation starts at the answer.
  const Ids ids =
      tok().encode_with_specials("The answer.<|close|>response<|sep|><|close|>message<|sep|>");
  ASSERT_EQ(ids, (Ids{262, 263, '.', kClose, 257, kSep, kClose, 258, kSep}));
  Result r = feed(ids, /*thinking=*/false);
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "The answer.");
  EXPECT_EQ(r.reasoning_tokens, 0);
}

TEST(ChatOutputParser, TextOutsideBothBlocksGoesToContent) {
  const Ids ids = tok().encode_with_specials(
      "Let<|close|>think<|sep|> between <|open|>response<|sep|>The<|close|>response<|sep|> after"
      "<|close|>message<|sep|> tail");
  Result r = feed(ids, true);
  EXPECT_EQ(r.reasoning, "Let");
  EXPECT_EQ(r.content, " between The after tail");
  EXPECT_EQ(r.reasoning_tokens, 1 + 3);
}

TEST(ChatOutputParser, SpelledControlTokensInOrdinaryTextStayText) {
  const std::string text = "Use <|close|>response<|sep|> or <|close|>think<|sep|> here";
  const Ids ids = tok().encode_ordinary(text);
  for (uint32_t id : ids) ASSERT_FALSE(tok().is_special(id));
  Result content = feed(ids, false);
  EXPECT_EQ(content.content, text);
  EXPECT_EQ(content.reasoning, "");
  Result reasoning = feed(ids, true);
  EXPECT_EQ(reasoning.reasoning, text);
  EXPECT_EQ(reasoning.content, "");
  EXPECT_EQ(reasoning.reasoning_tokens, static_cast<int64_t>(ids.size()));
}

TEST(ChatOutputParser, UnknownTagsAreShownVerbatim) {
  const std::string text =
      "Calling.<|open|>tool<|sep|><|open|>call tool=\"f\"<|sep|>{}<|close|>call<|sep|><|close|>tool<|sep|>";
  const Ids ids = tok().encode_with_specials(text);
  Result r = feed(ids, false);
  EXPECT_EQ(r.content, text);
  EXPECT_EQ(r.reasoning, "");

  // Held until <|sep|> shows it is not structural.
  K3ChatOutput p(tok(), false);
  EXPECT_TRUE(p.push(kOpen).empty());
  for (char c : std::string("toolx")) EXPECT_TRUE(p.push(static_cast<uint8_t>(c)).empty());
  EXPECT_EQ(p.push(kSep).content, "<|open|>toolx<|sep|>");
}

// ---- Tool calls ---------------------------------------------------------------

struct Call {
  std::string name, arguments;
  bool ended = false;
};

struct ToolResult {
  std::string reasoning, content;
  std::vector<Call> calls;
  std::vector<ChatDelta> deltas;
};

// Feeds the markup (encoded with specials) one token at a time and rebuilds
// the calls from their pieces, checking the order the API relies on: a call
// begins before any piece of it, pieces go to the latest call only, and
// nothing follows a call's end.
ToolResult feed_tools(const std::string& markup, bool thinking = false, const Ids& tail = {}) {
  K3ChatOutput p(tok(), thinking);
  ToolResult r;
  auto add = [&](const ChatDelta& d) {
    r.reasoning += d.reasoning;
    r.content += d.content;
    for (const ToolCallDelta& c : d.tool_calls) {
      if (c.begins) {
        EXPECT_EQ(c.index, r.calls.size());
        EXPECT_TRUE(r.calls.empty() || r.calls.back().ended);
        r.calls.push_back({c.name, "", false});
      }
      EXPECT_FALSE(c.begins && c.ends);
      EXPECT_EQ(c.index + 1, r.calls.size()) << "a piece of a call that is not the latest";
      EXPECT_FALSE(r.calls.back().ended) << "a piece after the call's end";
      r.calls.back().arguments += c.arguments;
      if (c.ends) r.calls.back().ended = true;
    }
    if (!d.empty()) r.deltas.push_back(d);
  };
  for (uint32_t id : cat(tok().encode_with_specials(markup), tail)) add(p.push(id));
  add(p.flush());
  return r;
}

TEST(ChatToolCalls, TwoCallsWithTypedArgumentsBecomeJsonObjects) {
  const ToolResult r = feed_tools(
      "Checking.<|close|>response<|sep|><|open|>tools<|sep|>"
      "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>"
      "<|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|>"
      "<|open|>argument key=\"opts\" type=\"object\"<|sep|>{\"unit\": \"C\"}<|close|>argument<|sep|>"
      "<|close|>call<|sep|>"
      "<|open|>call tool=\"now\" index=\"2\"<|sep|><|close|>call<|sep|>"
      "<|close|>tools<|sep|><|close|>message<|sep|>",
      /*thinking=*/false);
  EXPECT_EQ(r.content, "Checking.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris", "days": 3, "opts": {"unit": "C"}})");
  EXPECT_TRUE(r.calls[0].ended);
  EXPECT_EQ(r.calls[1].name, "now");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_TRUE(r.calls[1].ended);
}

TEST(ChatToolCalls, ArgumentsStreamInPiecesAfterTheName) {
  // Byte tokens: "Paris" is five tokens, so its value arrives in five pieces.
  const ToolResult r = feed_tools(
      "<|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"a\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a": "Paris"})");
  std::vector<std::string> pieces;
  for (const ChatDelta& d : r.deltas)
    for (const ToolCallDelta& c : d.tool_calls) pieces.push_back(c.begins ? "<begin " + c.name + ">" : c.arguments);
  EXPECT_EQ(pieces, (std::vector<std::string>{"<begin f>", "{\"a\": \"", "P", "a", "r", "i", "s", "\"", "}"}));
}

TEST(ChatToolCalls, StringValuesAreJsonEscapedWholeCharactersAtATime) {
  // A quote, a backslash, a newline, a tab and a two-byte character whose
  // bytes are separate tokens.
  const ToolResult r = feed_tools(
      "<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|>"
      "<|open|>argument key=\"say &quot;hi\\&quot;\" type=\"string\"<|sep|>a\"b\\c\nd\te\xc3\xa9<|close|>argument<|sep|>"
      "<|close|>call<|sep|><|close|>tools<|sep|>");
  ASSERT_EQ(r.calls.size(), 1u);
  const nlohmann::json args = nlohmann::json::parse(r.calls[0].arguments);
  EXPECT_EQ(args.size(), 1u);
  EXPECT_EQ(args.begin().key(), "say \"hi\\\"");
  EXPECT_EQ(args.begin().value(), "a\"b\\c\nd\te\xc3\xa9");
}

TEST(ChatToolCalls, AttributeValuesAreUnescaped) {
  const ToolResult r = feed_tools(
      "<|open|>tools<|sep|><|open|>call tool=\"a&amp;b&quot;c\" index=\"1\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "a&b\"c");
}

TEST(ChatToolCalls, AJsonBlockIsTheArgumentsAsWritten) {
  const ToolResult r = feed_tools(
      "<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|><|open|>json type=\"object\"<|sep|>not valid {"
      "<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "not valid {");
  EXPECT_TRUE(r.calls[0].ended);
}

TEST(ChatToolCalls, AClosingTagClosesTheBlocksOpenInsideIt) {
  // close(call) with the argument still open, then close(message) with a
  // second call open: both calls end, with their objects closed.
  const ToolResult r = feed_tools(
      "<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|><|open|>argument key=\"a\" type=\"string\"<|sep|>x"
      "<|close|>call<|sep|><|open|>call tool=\"g\"<|sep|><|open|>argument key=\"n\" type=\"number\"<|sep|>1"
      "<|close|>message<|sep|>after");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a": "x"})");
  EXPECT_EQ(r.calls[1].arguments, R"({"n": 1})");
  EXPECT_TRUE(r.calls[0].ended && r.calls[1].ended);
  EXPECT_EQ(r.content, "after");
}

TEST(ChatToolCalls, MalformedMarkupIsShownNotDropped) {
  // Text between calls and inside a call outside an argument goes to
  // content; a call without a tool name and an unknown tag are shown; an
  // argument's non-JSON number is passed as written.
  const ToolResult r = feed_tools(
      "<|open|>tools<|sep|>\n<|open|>call<|sep|>"
      "<|open|>call tool=\"f\"<|sep|> stray <|open|>weird<|sep|>"
      "<|open|>argument key=\"n\" type=\"number\"<|sep|>one<|close|>argument<|sep|><|close|>call<|sep|>"
      "<|close|>tools<|sep|>");
  EXPECT_EQ(r.content, "\n<|open|>call<|sep|> stray <|open|>weird<|sep|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"n": one})");
  EXPECT_TRUE(r.calls[0].ended);
}

TEST(ChatToolCalls, ACallCutOffByTheEndKeepsWhatWasWritten) {
  const ToolResult r = feed_tools(
      "<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|><|open|>argument key=\"a\" type=\"string\"<|sep|>par",
      false, {0xc3});  // ends inside a character
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"a\": \"par\xef\xbf\xbd");
  EXPECT_FALSE(r.calls[0].ended);
}

TEST(ChatToolCalls, ToolsBlockAfterReasoningLeavesTheReasoningChannel) {
  const ToolResult r = feed_tools(
      "Plan.<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
      /*thinking=*/true);
  EXPECT_EQ(r.reasoning, "Plan.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
}

// What the renderer writes for a history turn's calls (chat_template.h),
// read back: the same names, and arguments that parse to the same objects
// in the same key order.
TEST(ChatToolCalls, TheRenderersHistoryMarkupReadsBackAsTheSameCalls) {
  using OJson = nlohmann::ordered_json;
  const OJson first = OJson::parse(R"({"city": "Paris \"15e\"", "days": 3, "nested": {"b": [1, 2.5], "a": "x"},
                                      "flag": true, "none": null})");
  const OJson messages = OJson::array(
      {{{"role", "user"}, {"content", "Weather?"}},
       {{"role", "assistant"},
        {"content", "Checking."},
        {"tool_calls", OJson::array({{{"id", "c1"}, {"type", "function"},
                                      {"function", {{"name", "get_weather"}, {"arguments", first}}}},
                                     {{"id", "c2"}, {"type", "function"},
                                      {"function", {{"name", "now"}, {"arguments", "{}"}}}}})}}});
  ChatOptions o;
  o.thinking = false;
  o.reasoning_effort = std::nullopt;
  o.add_generation_prompt = false;
  const std::string text = render_chat_text(render_chat(messages, o));
  const size_t begin = text.find("<|open|>tools<|sep|>");
  const size_t end = text.find("<|close|>tools<|sep|>");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const ToolResult r = feed_tools(text.substr(begin, end + 21 - begin));
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(OJson::parse(r.calls[0].arguments), first) << r.calls[0].arguments;
  EXPECT_EQ(r.calls[1].name, "now");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.content, "");
}

TEST(ChatToolCalls, SpelledMarkupInOrdinaryTokensIsNoCall) {
  const std::string text = "<|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|><|close|>call<|sep|>";
  K3ChatOutput p(tok(), false);
  std::string content;
  for (uint32_t id : tok().encode_ordinary(text)) {
    const ChatDelta d = p.push(id);
    EXPECT_TRUE(d.tool_calls.empty());
    content += d.content;
  }
  content += p.flush().content;
  EXPECT_EQ(content, text);
}

TEST(ChatOutputParser, TagWithAttributesOnAStructuralNameIsShown) {
  const std::string text = "<|open|>response x=\"1\"<|sep|>";
  Result r = feed(tok().encode_with_specials(text), true);
  EXPECT_EQ(r.reasoning, text);
  EXPECT_EQ(r.content, "");
}

TEST(ChatOutputParser, TagCutByANewTagIsShownAndTheNewOneParsed) {
  // "<|open|>foo" never reaches <|sep|>; the next <|open|> starts open(response).
  Result r = feed(tok().encode_with_specials("a<|open|>foo<|open|>response<|sep|>b"), true);
  EXPECT_EQ(r.reasoning, "a<|open|>foo");
  EXPECT_EQ(r.content, "b");
  // a, open, f, o, o, and the three of open(response) were read in reasoning.
  EXPECT_EQ(r.reasoning_tokens, 8);

  Result c = feed(tok().encode_with_specials("<|close|><|close|>think<|sep|>x"), true);
  EXPECT_EQ(c.reasoning, "<|close|>");
  EXPECT_EQ(c.content, "x");
}

TEST(ChatOutputParser, TagMeetingAnotherSpecialIsReleasedAtOnce) {
  K3ChatOutput p(tok(), false);
  EXPECT_TRUE(p.push(kClose).empty());
  EXPECT_TRUE(p.push('t').empty());
  EXPECT_EQ(p.push(kEos).content, "<|close|>t[EOS]");
  EXPECT_EQ(p.push('x').content, "x");
  EXPECT_EQ(p.push(kSep).content, "<|sep|>");  // stray <|sep|> outside a tag
  EXPECT_TRUE(p.flush().empty());
}

TEST(ChatOutputParser, OtherSpecialsAndStraySepAreSpelled) {
  Result r = feed({'a', kSep, 'b', kBos, kEos, 'c'}, true);
  EXPECT_EQ(r.reasoning, "a<|sep|>b[BOS][EOS]c");
  EXPECT_EQ(r.content, "");
}

TEST(ChatOutputParser, OverlongTagIsShown) {
  K3ChatOutput p(tok(), false);
  EXPECT_TRUE(p.push(kOpen).empty());
  for (int i = 0; i < 256; ++i) ASSERT_TRUE(p.push('a').empty()) << i;
  // The 257th token after <|open|> exceeds the limit (a tool call's tag
  // holds a name and attributes, so the limit is well above the 1-3 tokens
  // of the structural names).
  EXPECT_EQ(p.push('a').content, "<|open|>" + std::string(257, 'a'));
  EXPECT_EQ(p.push(kSep).content, "<|sep|>");
}

TEST(ChatOutputParser, SplitUtf8CharacterComesOutWhole) {
  const Ids e = tok().encode_ordinary("\xc3\xa9");  // é
  ASSERT_EQ(e, (Ids{0xc3, 0xa9}));
  K3ChatOutput p(tok(), false);
  EXPECT_TRUE(p.push(0xc3).empty());
  EXPECT_EQ(p.push(0xa9).content, "\xc3\xa9");

  Result r = feed(tok().encode_ordinary("caf\xc3\xa9 \xc3\xa9t\xc3\xa9"), true);
  EXPECT_EQ(r.reasoning, "caf\xc3\xa9 \xc3\xa9t\xc3\xa9");
}

TEST(ChatOutputParser, SplitUtf8CharacterInsideAShownTag) {
  // <|open|> é <|sep|> with é as two byte tokens: shown whole.
  Result r = feed({kOpen, 0xc3, 0xa9, kSep}, false);
  EXPECT_EQ(r.content, "<|open|>\xc3\xa9<|sep|>");
}

TEST(ChatOutputParser, FragmentDanglingAtAChannelSwitchBecomesReplacement) {
  // C3 in reasoning, then close(think): the reasoning decoder is flushed.
  // A9 alone in content can never be completed either.
  K3ChatOutput p(tok(), true);
  EXPECT_TRUE(p.push(0xc3).empty());
  EXPECT_TRUE(p.push(kClose).empty());
  EXPECT_TRUE(p.push(256).empty());
  ChatDelta d = p.push(kSep);
  EXPECT_EQ(d.reasoning, kFffd);
  EXPECT_EQ(d.content, "");
  EXPECT_EQ(p.push(0xa9).content, kFffd);
}

TEST(ChatOutputParser, FlushShowsAnUnfinishedTagAndFragments) {
  K3ChatOutput p(tok(), false);
  EXPECT_EQ(p.push('x').content, "x");
  EXPECT_TRUE(p.push(kClose).empty());
  EXPECT_TRUE(p.push('t').empty());
  EXPECT_TRUE(p.push(0xc3).empty());
  ChatDelta d = p.flush();
  EXPECT_EQ(d.content, "<|close|>t" + kFffd);
  EXPECT_EQ(d.reasoning, "");
  EXPECT_TRUE(p.flush().empty());

  K3ChatOutput q(tok(), true);
  EXPECT_TRUE(q.push(0xe2).empty());  // first byte of €
  EXPECT_TRUE(q.push(0x82).empty());
  EXPECT_EQ(q.flush().reasoning, kFffd);
}

TEST(ChatOutputParser, ThinkBlockOpenedFromContent) {
  // open(think) is read in content (not counted); "b" and close(think) are.
  Result r = feed(tok().encode_with_specials("a<|open|>think<|sep|>b<|close|>think<|sep|>c"), false);
  EXPECT_EQ(r.content, "ac");
  EXPECT_EQ(r.reasoning, "b");
  EXPECT_EQ(r.reasoning_tokens, 1 + 3);
}

TEST(ChatOutputParser, WithoutStructuralTagsAChannelGetsTheWholeDecode) {
  // Random ids: bytes other than lowercase letters (so no tag can be named
  // think/response/message), the merged tokens that are no structural name,
  // and specials including <|open|>, <|close|>, <|sep|>. Invalid UTF-8 and
  // unfinished tags included.
  std::vector<uint32_t> pool;
  for (uint32_t b = 0; b < 256; ++b)
    if (b < 'a' || b > 'z') pool.push_back(b);
  for (uint32_t id = 259; id <= 263; ++id) pool.push_back(id);
  for (uint32_t id : {kBos, kEos, kOpen, kClose, kSep, kOpen, kClose, kSep, 300u, 519u}) pool.push_back(id);
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    Ids ids(rng() % 40);
    for (uint32_t& id : ids) id = pool[rng() % pool.size()];
    if (trial % 3 == 0) ids = cat(ids, {0xc3});  // a dangling fragment at the end
    const std::string expected = tok().decode(ids);
    Result reasoning = feed(ids, true);
    ASSERT_EQ(reasoning.reasoning, expected) << "trial " << trial;
    ASSERT_EQ(reasoning.content, "");
    ASSERT_EQ(reasoning.reasoning_tokens, static_cast<int64_t>(ids.size()));
    Result content = feed(ids, false);
    ASSERT_EQ(content.content, expected) << "trial " << trial;
    ASSERT_EQ(content.reasoning, "");
    ASSERT_EQ(content.reasoning_tokens, 0);
  }
}

// ---- TurnText and the response shapes of tool calls -------------------------

const std::string kTwoCalls =
    "Go.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|>"
    "<|open|>argument key=\"a\" type=\"number\"<|sep|>1<|close|>argument<|sep|><|close|>call<|sep|>"
    "<|open|>call tool=\"g\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>";

TEST(TurnTextToolCalls, OneToolCallEndsTheTurnAfterTheFirstCall) {
  for (const bool one : {false, true}) {
    SCOPED_TRACE(one);
    TurnText text(std::make_unique<K3ChatOutput>(tok(), false), {}, one);
    std::vector<std::string> names;
    std::string content, args;
    size_t pushed = 0;
    for (uint32_t id : tok().encode_with_specials(kTwoCalls)) {
      if (text.stopped()) break;
      ++pushed;
      const OutputDelta d = text.push(id);
      content += d.content;
      for (const ToolCallDelta& c : d.tool_calls) {
        if (c.begins) names.push_back(c.name);
        if (c.index == 0) args += c.arguments;
      }
    }
    if (!one) content += text.finish().content;
    EXPECT_EQ(content, "Go.");
    EXPECT_EQ(args, R"({"a": 1})");
    EXPECT_EQ(names, (one ? std::vector<std::string>{"f"} : std::vector<std::string>{"f", "g"}));
    EXPECT_EQ(text.stopped(), one);
    EXPECT_FALSE(text.stopped_by_string());
    if (one) {
      // It stopped at the <|sep|> of the first close(call).
      const std::string first = kTwoCalls.substr(0, kTwoCalls.find("<|close|>call<|sep|>") + 20);
      EXPECT_EQ(pushed, tok().encode_with_specials(first).size());
    }
  }
}

TEST(TurnTextToolCalls, StopStringsApplyToContentOnly) {
  // "Go" in the content ends the turn there: the calls after it are never
  // shown (the stop string cuts the turn, whatever channel follows).
  TurnText text(std::make_unique<K3ChatOutput>(tok(), false), {"Go"});
  std::string content;
  size_t calls = 0;
  for (uint32_t id : tok().encode_with_specials(kTwoCalls)) {
    const OutputDelta d = text.push(id);
    content += d.content;
    calls += d.tool_calls.size();
    if (text.stopped()) break;
  }
  EXPECT_TRUE(text.stopped_by_string());
  EXPECT_EQ(content, "");
  EXPECT_EQ(calls, 0u);
}

TEST(OpenAiToolShapes, CompletionAndChunksCarryCallsAsOpenAiSendsThem) {
  const ResponseHead head{"chatcmpl-1700000000-7", 1700000000, "tiny"};
  EXPECT_EQ(tool_call_id(head, 2), "call_1700000000_7_2");
  const nlohmann::json answer =
      chat_completion(head, "why", "", {{"call_x", "f", R"({"a": 1})"}}, "tool_calls", Usage{});
  EXPECT_EQ(answer["choices"][0]["message"], nlohmann::json::parse(R"({"role":"assistant","content":null,"refusal":null,
      "reasoning_content":"why","tool_calls":[{"id":"call_x","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]})"));
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "tool_calls");
  // Without calls, empty content stays "".
  EXPECT_EQ(chat_completion(head, "", "", {}, "stop", Usage{})["choices"][0]["message"]["content"], "");
  const std::string name = "f";
  EXPECT_EQ(tool_call_chunk_delta(head, 0, &name, ""), nlohmann::json::parse(R"({"tool_calls":[{"index":0,
      "id":"call_1700000000_7_0","type":"function","function":{"name":"f","arguments":""}}]})"));
  EXPECT_EQ(tool_call_chunk_delta(head, 1, nullptr, "{\"a"), nlohmann::json::parse(R"({"tool_calls":[{"index":1,
      "function":{"arguments":"{\"a"}}]})"));
}

// ---- StopMatcher ------------------------------------------------------------

TEST(StopMatcher, NoStopsPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.push("a<b"), "a<b");
  EXPECT_EQ(m.push(""), "");
  EXPECT_EQ(m.push("end"), "end");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopInsideOnePushDropsTheRest) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("abcENDxyz"), "abc");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, StopSplitAcrossPushes) {
  StopMatcher m({"bc"});
  EXPECT_EQ(m.push("ab"), "a");  // "b" may begin "bc"
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("c"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("d"), "");
}

TEST(StopMatcher, StopSpreadOverManyPushes) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("xS"), "x");
  EXPECT_EQ(m.push("T"), "");
  EXPECT_EQ(m.push("O"), "");
  EXPECT_EQ(m.push("Py"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, PartialPrefixThenMismatchIsReleased) {
  StopMatcher m({"bcd"});
  EXPECT_EQ(m.push("ab"), "a");
  EXPECT_EQ(m.push("c"), "");     // "bc" still a prefix
  EXPECT_EQ(m.push("x"), "bcx");  // "bcx" is not
  EXPECT_FALSE(m.stopped());
  // A mismatch that itself starts a new prefix keeps only that.
  EXPECT_EQ(m.push("bcb"), "bc");
  EXPECT_EQ(m.push("cd!"), "");  // the held "b" began the stop
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, EarliestStopWins) {
  // "lo w" starts at 3, "o" at 4: the earlier one wins whatever the order.
  StopMatcher a({"o", "lo w"});
  EXPECT_EQ(a.push("hello world"), "hel");
  StopMatcher b({"lo w", "o"});
  EXPECT_EQ(b.push("hello world"), "hel");
  // Across pushes: "ab" is held as a prefix of "abc"; "bd" completes first.
  StopMatcher c({"abc", "bd"});
  EXPECT_EQ(c.push("xab"), "x");
  EXPECT_EQ(c.push("d"), "a");
  EXPECT_TRUE(c.stopped());
}

TEST(StopMatcher, LongestHeldPrefixOverAllStops) {
  StopMatcher m({"xyz", "zab"});
  // "za" is a prefix of "zab", longer than any suffix matching "xyz".
  EXPECT_EQ(m.push("qqza"), "qq");
  EXPECT_EQ(m.flush(), "za");
}

TEST(StopMatcher, StopAtTheVeryStart) {
  StopMatcher m({"Hi"});
  EXPECT_EQ(m.push("Hi there"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FlushReturnsHeldText) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("abcST"), "abc");
  EXPECT_EQ(m.flush(), "ST");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, MultiByteStopCutsOnCharacterBoundaries) {
  StopMatcher m({"\xc3\xa9!"});                  // "é!"
  EXPECT_EQ(m.push("caf\xc3\xa9"), "caf");       // "é" held whole
  EXPECT_EQ(m.push(" ok"), "\xc3\xa9 ok");
  EXPECT_EQ(m.push("\xc3\xa9!"), "");
  EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace deltafin::api
