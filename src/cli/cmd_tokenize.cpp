// `deltafin tokenize`: prints the token ids of a text under a model's
// tokenizer, for checking the tokenizer against other implementations.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "tokenizer/chat_encode.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace deltafin::cli {

namespace {

struct TokenizeOptions {
  std::string model_dir;
  std::string text;
  bool specials = false;
  bool json = false;
  // Chat mode (k3-model.md §9): --text becomes one user message, or --messages
  // gives the whole conversation as a JSON array.
  bool chat = false, no_thinking = false, render = false;
  std::string messages, effort = "max";
};

// The rendered conversation's ids: each segment tokenised on its own, special
// spellings recognised only in the renderer's control segments.
std::vector<uint32_t> encode_chat_request(const Tokenizer& tokenizer, const TokenizeOptions& o, std::string* text) {
  nlohmann::ordered_json messages;
  if (!o.messages.empty()) {
    try {
      messages = nlohmann::ordered_json::parse(o.messages);
    } catch (const nlohmann::json::exception& e) {
      fail("--messages: not valid JSON: ", e.what());
    }
  } else {
    messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", o.text}}});
  }
  ChatOptions options;
  options.thinking = !o.no_thinking;
  options.reasoning_effort = o.effort;
  std::vector<ChatSegment> segments = render_chat(messages, options);
  *text = render_chat_text(segments);
  return encode_chat_segments(tokenizer, segments);
}

int run_tokenize(const TokenizeOptions& o) {
  Tokenizer tokenizer = Tokenizer::load(o.model_dir);
  std::vector<uint32_t> ids;
  if (o.chat || !o.messages.empty()) {
    std::string rendered;
    ids = encode_chat_request(tokenizer, o, &rendered);
    if (o.render) std::printf("%s\n", rendered.c_str());
  } else {
    if (o.text.empty() && o.messages.empty()) fail("tokenize: give --text (or --chat with --text or --messages)");
    ids = o.specials ? tokenizer.encode_with_specials(o.text) : tokenizer.encode_ordinary(o.text);
  }
  std::string line;
  if (o.json) {
    line = nlohmann::json(ids).dump();
  } else {
    for (size_t i = 0; i < ids.size(); ++i) line += cat(i ? " " : "", ids[i]);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

Command add_tokenize(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* sub = app.add_subcommand("tokenize", "Print the token ids of a text under a model's tokenizer");
  sub->add_option("--model", options->model_dir, "Model directory (holds tiktoken.model and tokenizer_config.json)")
      ->required();
  sub->add_option("--text", options->text, "Text to tokenize (UTF-8)");
  sub->add_flag("--specials", options->specials,
                "Recognise special-token spellings such as <|open|> (default: all text is ordinary)");
  sub->add_flag("--json", options->json, "Print a JSON array instead of space-separated ids");
  sub->add_flag("--chat", options->chat, "Render --text as one user message with the K3 chat template");
  sub->add_option("--messages", options->messages, "Chat mode: the conversation as a JSON array of messages");
  sub->add_option("--reasoning-effort", options->effort, "Chat mode: thinking effort")
      ->check(CLI::IsMember({"low", "high", "max"}))
      ->capture_default_str();
  sub->add_flag("--no-thinking", options->no_thinking, "Chat mode: non-thinking (response) generation prompt");
  sub->add_flag("--render", options->render, "Chat mode: also print the rendered template text");
  return {sub, [options]() -> int { return run_tokenize(*options); }};
}

}  // namespace deltafin::cli
