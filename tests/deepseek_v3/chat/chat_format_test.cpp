// The DeepSeek-V3 family's tokenizer files and chat formats on generated
// checkpoints' tokenizers: each flavour's rendering against strings worked
// out by hand from its released template (model/deepseek_v3/chat_format.h),
// the answer parser on hand-built token streams, the pre-tokenizer chain on
// hand-split texts, and the files' layout. The real tokenizer and templates
// are checked in deepseek_v3_oracle_test.cpp.
#include "model/deepseek_v3/chat_format.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {
namespace deepseek_v3_chat_test {
namespace {

using Json = nlohmann::ordered_json;
using F = DsChatFlavor;

constexpr int64_t kVocab = 700;

// One generated tokenizer directory per flavour, loaded once.
struct Flavour {
  test::TempDir dir;
  std::unique_ptr<DeepSeekV3Tokenizer> tok;
};

const Flavour& flavour(F f) {
  static std::map<F, std::unique_ptr<Flavour>> cache;
  auto& slot = cache[f];
  if (!slot) {
    slot = std::make_unique<Flavour>();
    write_deepseek_v3_tokenizer_files(slot->dir.path(), f, kVocab);
    slot->tok = load_deepseek_v3_tokenizer(slot->dir.path());
  }
  return *slot;
}

const ChatFormat& chat(F f) {
  const DeepSeekV3Tokenizer& t = *flavour(f).tok;
  if (!t.chat) throw std::runtime_error(t.no_chat);
  return *t.chat;
}

// The expected string as the released tokenizer would tokenize it (spellings
// of added tokens become their ids), which the render must equal.
std::vector<uint32_t> encode_rendered(F f, const std::string& text) {
  const DeepSeekV3Tokenizer& t = *flavour(f).tok;
  return t.hf ? t.hf->encode(text, true) : t.tiktoken->encode_with_specials(text);
}

std::string decode(F f, const std::vector<uint32_t>& ids) {
  const DeepSeekV3Tokenizer& t = *flavour(f).tok;
  return t.hf ? t.hf->decode(ids) : t.tiktoken->decode(ids);
}

uint32_t id_of(F f, const std::string& spelling) {
  const DeepSeekV3Tokenizer& t = *flavour(f).tok;
  std::optional<uint32_t> id = t.hf ? t.hf->token_id(spelling) : t.tiktoken->find_special(spelling);
  if (!id) throw std::runtime_error("no token " + spelling);
  return *id;
}

ChatTurnOptions opts(bool thinking = false) {
  ChatTurnOptions o;
  o.thinking = thinking;
  return o;
}

// Renders and checks both the text and the ids against `expected`.
RenderedChat expect_render(F f, const Json& messages, const ChatTurnOptions& o, const std::string& expected) {
  RenderedChat r = chat(f).render(messages, o);
  EXPECT_EQ(decode(f, r.tokens), expected);
  EXPECT_EQ(r.tokens, encode_rendered(f, expected));
  return r;
}

Json msg(const char* role, const Json& content) { return Json{{"role", role}, {"content", content}}; }

Json call(const char* name, const Json& arguments, const char* id = nullptr) {
  Json c{{"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
  if (id) c["id"] = id;
  return c;
}

Json assistant_calls(const Json& content, const Json& calls) {
  return Json{{"role", "assistant"}, {"content", content}, {"tool_calls", calls}};
}

const std::string B = "<｜begin▁of▁sentence｜>", E = "<｜end▁of▁sentence｜>", U = "<｜User｜>", A = "<｜Assistant｜>";
const std::string CSB = "<｜tool▁calls▁begin｜>", CSE = "<｜tool▁calls▁end｜>", CB = "<｜tool▁call▁begin｜>",
                  CE = "<｜tool▁call▁end｜>", SEP = "<｜tool▁sep｜>", OSB = "<｜tool▁outputs▁begin｜>",
                  OSE = "<｜tool▁outputs▁end｜>", OB = "<｜tool▁output▁begin｜>", OE = "<｜tool▁output▁end｜>";

// ---- files -----------------------------------------------------------------

TEST(DeepSeekV3TokenizerFiles, SpecialsAtTheReleasePositions) {
  for (F f : {F::DeepSeekV3, F::DeepSeekR1, F::DeepSeekV31}) {
    const HfTokenizer& t = *flavour(f).tok->hf;
    SCOPED_TRACE(ds_chat_flavor_name(f));
    EXPECT_EQ(t.vocab_size(), static_cast<size_t>(kVocab));
    EXPECT_EQ(t.token_id("<｜begin▁of▁sentence｜>"), 0u);
    EXPECT_EQ(t.token_id("<｜end▁of▁sentence｜>"), 1u);
    EXPECT_EQ(t.token_id("<｜▁pad▁｜>"), 2u);
    // The added tokens follow the BPE vocabulary, <｜tool▁sep｜> last.
    const std::vector<DeepSeekAddedToken> added = deepseek_v3_added_tokens(f);
    const uint32_t first = static_cast<uint32_t>(kVocab - added.size());
    EXPECT_EQ(t.model_vocab_size(), first);
    for (size_t k = 0; k < added.size(); ++k) EXPECT_EQ(t.token_id(added[k].content), first + k) << added[k].content;
    EXPECT_EQ(t.token_id("<｜tool▁sep｜>"), static_cast<uint32_t>(kVocab - 1));
    EXPECT_EQ(t.token_id("<think>").has_value(), f != F::DeepSeekV3);
    if (f != F::DeepSeekV3) {
      EXPECT_EQ(*t.token_id("</think>") + 1, *t.token_id("<｜fim▁hole｜>"));
    }
    // Bytes start at 3: the first byte token is byte 0.
    const uint32_t zero = 0;
    EXPECT_EQ(t.decode(std::vector<uint32_t>{3}), std::string(1, static_cast<char>(zero)));
  }
}

TEST(DeepSeekV3TokenizerFiles, KimiK2ReservedTokens) {
  const Tokenizer& t = *flavour(F::KimiK2).tok->tiktoken;
  const uint32_t base = static_cast<uint32_t>(kVocab - 256);
  EXPECT_EQ(t.vocab_size(), static_cast<uint32_t>(kVocab));
  EXPECT_EQ(t.num_ranks(), base);
  EXPECT_EQ(t.find_special("<|im_end|>"), base + 2);
  EXPECT_EQ(t.find_special("<|im_system|>"), base + 10);
  EXPECT_EQ(t.find_special("<|tool_calls_section_begin|>"), base + 11);
  EXPECT_EQ(t.find_special("<|tool_call_argument_begin|>"), base + 14);
  EXPECT_EQ(t.find_special("<|im_middle|>"), base + 17);
  EXPECT_EQ(t.find_special("<|reserved_token_" + std::to_string(base + 5) + "|>"), base + 5);
  EXPECT_EQ(t.find_special("[PAD]"), base + 255);
}

TEST(DeepSeekV3TokenizerFiles, TooSmallAVocabularyIsRefused) {
  test::TempDir dir;
  test::expect_error([&] { write_deepseek_v3_tokenizer_files(dir.path(), F::DeepSeekR1, 3 + 256 + 17); },
                     {"vocab_size 276 is too small", "17 added tokens"});
}

TEST(DeepSeekV3TokenizerFiles, FlavourDetectedFromTheFiles) {
  for (F f : {F::DeepSeekV3, F::DeepSeekR1, F::DeepSeekV31, F::KimiK2}) {
    EXPECT_EQ(flavour(f).tok->flavor, f) << ds_chat_flavor_name(f);
    EXPECT_EQ(detect_deepseek_v3_flavor(flavour(f).dir.path()).flavor, f);
  }
  // A DeepSeek tokenizer without a chat template (a base model) has no chat.
  test::TempDir dir;
  write_deepseek_v3_tokenizer_files(dir.path(), F::DeepSeekV3, kVocab);
  Json config = Json::parse(read_text_file(dir.file("tokenizer_config.json")));
  config.erase("chat_template");
  write_file_atomic(dir.file("tokenizer_config.json"), config.dump(2));
  auto t = load_deepseek_v3_tokenizer(dir.path());
  EXPECT_EQ(t->chat, nullptr);
  EXPECT_NE(t->no_chat.find("has a chat template (a base model)"), std::string::npos) << t->no_chat;
}

// ---- pre-tokenizer (hand-split) ---------------------------------------------

TEST(DeepSeekV3Pretokenizer, DigitsCjkPunctuation) {
  using P = std::vector<std::string>;
  // Digits first, in runs of at most three, cutting through words.
  EXPECT_EQ(deepseek_v3_pretokenize("12345"), (P{"123", "45"}));
  EXPECT_EQ(deepseek_v3_pretokenize("abc1234def"), (P{"abc", "123", "4", "def"}));
  EXPECT_EQ(deepseek_v3_pretokenize("3.14"), (P{"3", ".", "14"}));
  // CJK ideographs, hiragana and katakana are one run; Hangul is not in it
  // (the letters alternative takes it, with the space before it).
  EXPECT_EQ(deepseek_v3_pretokenize("日本語のテキストabc"), (P{"日本語のテキスト", "abc"}));
  EXPECT_EQ(deepseek_v3_pretokenize("你好 세계"), (P{"你好", " 세계"}));
  // One ASCII punctuation mark joins the letters after it.
  EXPECT_EQ(deepseek_v3_pretokenize("x.y"), (P{"x", ".y"}));
  EXPECT_EQ(deepseek_v3_pretokenize("Hello, world!"), (P{"Hello", ",", " world", "!"}));
  EXPECT_EQ(deepseek_v3_pretokenize("a  b"), (P{"a", " ", " b"}));
  EXPECT_EQ(deepseek_v3_pretokenize("line1\n\nline2"), (P{"line", "1", "\n\n", "line", "2"}));
  EXPECT_EQ(deepseek_v3_pretokenize("!!?\n"), (P{"!!?\n"}));
}

TEST(DeepSeekV3Pretokenizer, EncodingFollowsTheChain) {
  // Every piece encodes on its own: the ids of the whole text are those of
  // its pieces in turn.
  const HfTokenizer& t = *flavour(F::DeepSeekV3).tok->hf;
  const std::string text = "The year 2026 在東京, x.y and 65536 cafés!";
  std::vector<uint32_t> pieces;
  for (const std::string& p : deepseek_v3_pretokenize(text)) {
    const std::vector<uint32_t> ids = t.encode(p, false);
    pieces.insert(pieces.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(t.encode(text, false), pieces);
  EXPECT_EQ(t.decode(t.encode(text, false)), text);
}

// ---- DeepSeek V3 ---------------------------------------------------------

TEST(DeepSeekV3Chat, SystemsAndTurns) {
  const Json m = Json::array({msg("system", "S1"), msg("user", "Hi"), msg("system", "S2"), msg("assistant", "Hello"),
                              msg("user", "Again")});
  RenderedChat r = expect_render(F::DeepSeekV3, m, opts(),
                                 B + "S1\n\nS2" + U + "Hi" + A + "Hello" + E + U + "Again" + A);
  EXPECT_FALSE(r.thinking);
}

TEST(DeepSeekV3Chat, ToolCallsAndResults) {
  const Json m = Json::array({msg("user", "W?"),
                              assistant_calls(nullptr, Json::array({call("f", Json{{"a", 1}}), call("g", "{}")})),
                              msg("tool", "r1"), msg("tool", "r2")});
  const std::string calls = CSB + CB + "function" + SEP + "f\n```json\n{\"a\": 1}\n```" + CE + "\n" + CB + "function" +
                            SEP + "g\n```json\n{}\n```" + CE + CSE + E;
  const std::string outputs = OSB + OB + "r1" + OE + "\n" + OB + "r2" + OE + OSE;
  // After the results the model answers: no generation prompt.
  expect_render(F::DeepSeekV3, m, opts(), B + U + "W?" + A + calls + outputs);
  Json more = m;
  more.push_back(msg("assistant", "Sunny."));
  more.push_back(msg("user", "Thanks"));
  // A second round starts its results afresh.
  more.push_back(assistant_calls("Again:", Json::array({call("f", "{}")})));
  more.push_back(msg("tool", "r3"));
  expect_render(F::DeepSeekV3, more, opts(),
                B + U + "W?" + A + calls + outputs + "Sunny." + E + U + "Thanks" + A + "Again:" + CSB + CB +
                    "function" + SEP + "f\n```json\n{}\n```" + CE + CSE + E + OSB + OB + "r3" + OE + OSE);
}

TEST(DeepSeekV3Chat, ToolsCannotBeDeclared) {
  Json tools = Json::array({Json{{"type", "function"}, {"function", {{"name", "f"}}}}});
  ChatTurnOptions o = opts();
  o.tools = tools;
  try {
    chat(F::DeepSeekV3).render(Json::array({msg("user", "x")}), o);
    FAIL() << "tools were accepted";
  } catch (const ChatOptionError& e) {
    EXPECT_EQ(e.field(), "tools");
  }
  o.tool_choice = "none";  // nothing to declare then
  expect_render(F::DeepSeekV3, Json::array({msg("user", "x")}), o, B + U + "x" + A);
  o.tool_choice = "required";
  try {
    chat(F::DeepSeekV31).render(Json::array({msg("user", "x")}), o);
    FAIL() << "tool_choice required was accepted";
  } catch (const ChatOptionError& e) {
    EXPECT_EQ(e.field(), "tool_choice");
  }
}

// ---- DeepSeek R1 ---------------------------------------------------------

TEST(DeepSeekR1Chat, ThinkingPromptAndHistoryWithoutReasoning) {
  const Json m = Json::array({msg("system", "S"), msg("user", "Hi"),
                              msg("assistant", "<think>\nplan\n</think>\n\nHello"), msg("user", "Q")});
  // thinking=false cannot be expressed: R1's prompt always opens <think>.
  RenderedChat r = expect_render(F::DeepSeekR1, m, opts(false),
                                 B + "S" + U + "Hi" + A + "\n\nHello" + E + U + "Q" + A + "<think>\n");
  EXPECT_TRUE(r.thinking);
}

TEST(DeepSeekR1Chat, ToolCallsAndResults) {
  const Json m = Json::array({msg("user", "W"), assistant_calls("Checking.", Json::array({call("f", "{}")})),
                              msg("tool", "r1"), msg("tool", "r2")});
  RenderedChat r = expect_render(F::DeepSeekR1, m, opts(),
                                 B + U + "W" + A + "Checking." + CSB + CB + "function" + SEP + "f\n```json\n{}\n```" +
                                     CE + CSE + E + OSB + OB + "r1" + OE + OB + "r2" + OE + OSE);
  EXPECT_FALSE(r.thinking);
  // The answer after results follows <｜tool▁outputs▁end｜> directly.
  Json more = m;
  more.push_back(msg("assistant", "Done."));
  more.push_back(msg("user", "ok"));
  expect_render(F::DeepSeekR1, more, opts(),
                B + U + "W" + A + "Checking." + CSB + CB + "function" + SEP + "f\n```json\n{}\n```" + CE + CSE + E +
                    OSB + OB + "r1" + OE + OB + "r2" + OE + OSE + "Done." + E + U + "ok" + A + "<think>\n");
}

// ---- DeepSeek V3.1 -------------------------------------------------------

TEST(DeepSeekV31Chat, HybridThinking) {
  const Json m = Json::array({msg("system", "S"), msg("user", "Hi"), msg("assistant", "plan</think>A</think>B"),
                              msg("user", "Q")});
  // History drops what precedes the first </think>; the rest is message
  // text, so its "</think>" stays text (not the token a string tokenizer
  // would make of it).
  const std::string before = B + "S" + U + "Hi" + A + "</think>", after = E + U + "Q" + A;
  for (bool thinking : {false, true}) {
    const std::string prompt = thinking ? "<think>" : "</think>";
    RenderedChat r = chat(F::DeepSeekV31).render(m, opts(thinking));
    EXPECT_EQ(decode(F::DeepSeekV31, r.tokens), before + "A</think>B" + after + prompt);
    std::vector<uint32_t> want = encode_rendered(F::DeepSeekV31, before);
    for (uint32_t id : flavour(F::DeepSeekV31).tok->hf->encode("A</think>B", false)) want.push_back(id);
    for (uint32_t id : encode_rendered(F::DeepSeekV31, after + prompt)) want.push_back(id);
    EXPECT_EQ(r.tokens, want);
    EXPECT_EQ(r.thinking, thinking);
  }
  expect_render(F::DeepSeekV31, Json::array({msg("user", "Hi"), msg("assistant", "plan</think>Answer"), msg("user", "Q")}),
                opts(), B + U + "Hi" + A + "</think>Answer" + E + U + "Q" + A + "</think>");
}

TEST(DeepSeekV31Chat, ToolCallsResultsAndDeclarations) {
  Json tools = Json::array({Json{{"type", "function"},
                                 {"function",
                                  {{"name", "get_weather"},
                                   {"description", "Weather now"},
                                   {"parameters",
                                    {{"type", "object"},
                                     {"properties", {{"city", {{"type", "string"}, {"description", "Ville é"}}}}}}}}}}});
  ChatTurnOptions o = opts(true);
  o.tools = tools;
  const Json m = Json::array(
      {msg("system", "S"), msg("user", "W"),
       assistant_calls("Let me check.", Json::array({call("get_weather", Json{{"city", "Paris"}}), call("g", "{}")})),
       msg("tool", "r1"), msg("tool", "r2")});
  const std::string description =
      "\n\n## Tools\nYou have access to the following tools:\n\n### get_weather\nDescription: Weather now\n\n"
      "Parameters: {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": "
      "\"Ville \\u00e9\"}}}\n\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n" +
      CSB + CB + "tool_call_name" + SEP + "tool_call_arguments" + CE + "{{additional_tool_calls}}" + CSE +
      "\n\nWhere:\n\n- `tool_call_name` must be an exact match to one of the available tools\n"
      "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
      "- For multiple tool calls, chain them directly without separators or spaces\n";
  // No generation prompt after results (even thinking): the model answers.
  RenderedChat r = expect_render(F::DeepSeekV31, m, o,
                                 B + "S" + description + U + "W" + A + "</think>Let me check." + CSB + CB +
                                     "get_weather" + SEP + "{\"city\": \"Paris\"}" + CE + CB + "g" + SEP + "{}" + CE +
                                     CSE + E + OB + "r1" + OE + OB + "r2" + OE);
  EXPECT_FALSE(r.thinking);
}

// ---- Kimi K2 ---------------------------------------------------------------

const std::string KS = "<|im_system|>", KU = "<|im_user|>", KA = "<|im_assistant|>", KM = "<|im_middle|>",
                  KE = "<|im_end|>";

TEST(KimiK2Chat, DefaultSystemNamesAndPrompt) {
  Json user = msg("user", "Hi");
  user["name"] = "alice";
  RenderedChat r = expect_render(F::KimiK2, Json::array({user, msg("assistant", "Hello"), msg("user", "Q")}), opts(true),
                                 KS + "system" + KM + "You are Kimi, an AI assistant created by Moonshot AI." + KE + KU +
                                     "alice" + KM + "Hi" + KE + KA + "assistant" + KM + "Hello" + KE + KU + "user" + KM +
                                     "Q" + KE + KA + "assistant" + KM);
  EXPECT_FALSE(r.thinking);
  expect_render(F::KimiK2, Json::array({msg("system", "S"), msg("user", Json::array({{{"type", "text"}, {"text", "a"}},
                                                                                     {{"type", "text"}, {"text", "b"}}}))}),
                opts(), KS + "system" + KM + "S" + KE + KU + "user" + KM + "ab" + KE + KA + "assistant" + KM);
}

TEST(KimiK2Chat, ToolsCallsAndResults) {
  ChatTurnOptions o = opts();
  o.tools = Json::array({Json{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", Json::object()}}}}});
  Json result1 = msg("tool", "r1");
  result1["tool_call_id"] = "call_x_0";
  Json result2 = msg("tool", "r2");
  result2["tool_call_id"] = "functions.g:7";
  const Json m = Json::array(
      {msg("system", "S"), msg("user", "W"),
       assistant_calls(nullptr, Json::array({call("f", Json{{"a", 1}}, "call_x_0"), call("g", "{}", "functions.g:7")})),
       result1, result2});
  expect_render(F::KimiK2, m, o,
                KS + "tool_declare" + KM + "\n  # Tools\n  [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                                           "\"parameters\": {}}}]" +
                    KE + KS + "system" + KM + "S" + KE + KU + "user" + KM + "W" + KE + KA + "assistant" + KM +
                    "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": "
                    "1}<|tool_call_end|><|tool_call_begin|>functions.g:7<|tool_call_argument_begin|>{}<|tool_call_end|>"
                    "<|tool_calls_section_end|>" +
                    KE + KS + "tool" + KM + "## Return of functions.f:0\n    r1" + KE + KS + "tool" + KM +
                    "## Return of functions.g:7\n    r2" + KE + KA + "assistant" + KM);
}

// ---- answers ---------------------------------------------------------------

struct Answer {
  std::string reasoning, content;
  std::vector<ToolCallDelta> calls;
  int64_t reasoning_tokens = 0;
};

// Feeds `parts` (text, or "<...>" spellings of single tokens) one id at a time.
Answer parse(F f, bool thinking, const std::vector<std::string>& parts) {
  std::unique_ptr<ChatOutput> out = chat(f).output(thinking);
  Answer a;
  auto take = [&](const ChatDelta& d) {
    a.reasoning += d.reasoning;
    a.content += d.content;
    a.calls.insert(a.calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  };
  const TokenText& text = *flavour(f).tok->text;
  for (const std::string& p : parts) {
    const bool token = p.size() > 2 && p.front() == '<' && p.back() == '>' && p.find(' ') == std::string::npos;
    const std::vector<uint32_t> ids = token ? std::vector<uint32_t>{id_of(f, p)} : text.encode_ordinary(p);
    for (uint32_t id : ids) take(out->push(id));
  }
  take(out->flush());
  a.reasoning_tokens = out->reasoning_tokens();
  return a;
}

ToolCallDelta begins(size_t index, const char* name) {
  ToolCallDelta d;
  d.index = index;
  d.begins = true;
  d.name = name;
  return d;
}
ToolCallDelta ends(size_t index, const char* arguments) {
  ToolCallDelta d;
  d.index = index;
  d.ends = true;
  d.arguments = arguments;
  return d;
}

TEST(DeepSeekV3Answer, ReasoningThenAnswer) {
  Answer a = parse(F::DeepSeekR1, true, {"\nI should greet.\n", "</think>", "\n\nHello!"});
  EXPECT_EQ(a.reasoning, "I should greet.");
  EXPECT_EQ(a.content, "Hello!");
  EXPECT_GT(a.reasoning_tokens, 2);
  a = parse(F::DeepSeekV31, false, {"Plain answer."});
  EXPECT_EQ(a.reasoning, "");
  EXPECT_EQ(a.content, "Plain answer.");
}

TEST(DeepSeekV3Answer, V31Calls) {
  Answer a = parse(F::DeepSeekV31, false,
                   {"I'll check.", CSB, CB, "get_weather", SEP, "{\"city\": \"Paris\"}", CE, CB, "g", SEP, "{}", CE, CSE});
  EXPECT_EQ(a.content, "I'll check.");
  EXPECT_EQ(a.calls, (std::vector<ToolCallDelta>{begins(0, "get_weather"), ends(0, "{\"city\": \"Paris\"}"),
                                                 begins(1, "g"), ends(1, "{}")}));
}

TEST(DeepSeekV3Answer, FencedCalls) {
  // The "\n" between calls is the template's separator, not content.
  Answer a = parse(F::DeepSeekV3, false,
                   {"Calling.", CSB, CB, "function", SEP, "f\n```json\n{\"a\": 1}\n```", CE, "\n", CB, "function", SEP,
                    "h\n```json\n[]\n```", CE, CSE});
  EXPECT_EQ(a.content, "Calling.");
  EXPECT_EQ(a.calls, (std::vector<ToolCallDelta>{begins(0, "f"), ends(0, "{\"a\": 1}"), begins(1, "h"), ends(1, "[]")}));
}

TEST(DeepSeekV3Answer, MalformedOrCutOffCallsAreShown) {
  // No fence: not V3's call form, shown as written.
  Answer a = parse(F::DeepSeekV3, false, {CSB, CB, "function", SEP, "f {}", CE, CSE});
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, CB + "function" + SEP + "f {}" + CE);
  // Cut off by the end of generation.
  a = parse(F::DeepSeekV31, false, {"x", CSB, CB, "f", SEP, "{\"a\""});
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, "x" + CB + "f" + SEP + "{\"a\"");
}

TEST(KimiK2Answer, Calls) {
  Answer a = parse(F::KimiK2, false,
                   {"Checking. ", "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "functions.get_weather:0",
                    "<|tool_call_argument_begin|>", "{\"city\": \"Beijing\"}", "<|tool_call_end|>",
                    "<|tool_call_begin|>", "get_news:1", "<|tool_call_argument_begin|>", "{}", "<|tool_call_end|>",
                    "<|tool_calls_section_end|>"});
  EXPECT_EQ(a.content, "Checking. ");
  EXPECT_EQ(a.calls, (std::vector<ToolCallDelta>{begins(0, "get_weather"), ends(0, "{\"city\": \"Beijing\"}"),
                                                 begins(1, "get_news"), ends(1, "{}")}));
  // An id without ":N" is not a call.
  a = parse(F::KimiK2, false, {"<|tool_calls_section_begin|>", "<|tool_call_begin|>", "functions.bad",
                               "<|tool_call_argument_begin|>", "{}", "<|tool_call_end|>", "<|tool_calls_section_end|>"});
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, "<|tool_call_begin|>functions.bad<|tool_call_argument_begin|>{}<|tool_call_end|>");
}

}  // namespace
}  // namespace deepseek_v3_chat_test
}  // namespace deltafin
