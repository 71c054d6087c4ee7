// `deltafin tokenize`: prints the token ids of a text under a model's
// tokenizer (K3's tiktoken.model or a Hugging Face tokenizer.json), for
// checking the tokenizer and the chat template against other implementations.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/common/chat_format.h"
#include "model/registry.h"
#include "util/error.h"

namespace deltafin::cli {

namespace {

struct TokenizeOptions {
  std::string model_dir;
  std::string text;
  bool specials = false;
  bool json = false;
  // Chat mode (the family's template: k3-model.md §9, docs/qwen3-moe.md §5):
  // --text becomes one user message, or --messages gives the whole
  // conversation as a JSON array.
  bool chat = false, no_thinking = false, render = false;
  std::string messages, effort = "max";
  // The request fields of the same names, as JSON (OpenAI's shapes).
  std::string tools, tool_choice, response_format;
};

nlohmann::ordered_json json_option(const std::string& text, const char* flag) {
  if (text.empty()) return nullptr;
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(flag, ": not valid JSON: ", e.what());
  }
}

// The conversation of --text (one user message) or --messages, rendered by
// the family's chat template.
nlohmann::ordered_json chat_messages(const TokenizeOptions& o) {
  if (o.messages.empty()) return nlohmann::ordered_json::array({{{"role", "user"}, {"content", o.text}}});
  try {
    return nlohmann::ordered_json::parse(o.messages);
  } catch (const nlohmann::json::exception& e) {
    fail("--messages: not valid JSON: ", e.what());
  }
}

int run_tokenize(const TokenizeOptions& o) {
  const std::unique_ptr<FamilyTokenizer> tokenizer = open_family_tokenizer(o.model_dir);
  std::vector<uint32_t> ids;
  if (o.chat || !o.messages.empty()) {
    const ChatFormat* chat = tokenizer->chat();
    if (!chat) fail("--chat: ", tokenizer->chat_missing());
    ChatTurnOptions options;
    options.thinking = !o.no_thinking;
    options.reasoning_effort = o.effort;
    options.tools = json_option(o.tools, "--tools");
    options.tool_choice = json_option(o.tool_choice, "--tool-choice");
    options.response_format = json_option(o.response_format, "--response-format");
    const nlohmann::ordered_json messages = chat_messages(o);
    try {
      ids = chat->render(messages, options).tokens;
    } catch (const ChatOptionError& e) {
      fail(e.field(), ": ", e.what());
    }
    if (o.render) std::printf("%s\n", tokenizer->render_text(messages, options).c_str());
  } else {
    if (o.text.empty() && o.messages.empty()) fail("tokenize: give --text (or --chat with --text or --messages)");
    ids = tokenizer->encode(o.text, o.specials);
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
  sub->footer(R"(The tokenizer is K3's tiktoken.model, or a Hugging Face tokenizer.json (a directory with tokenizer.json
and no tiktoken.model). --chat renders the text as one user message with the family's chat template
(K3's XTML, Qwen3's ChatML); --messages gives a whole conversation, --tools, --tool-choice and
--response-format the request fields of those names, and --render also prints the rendered text. Without
--specials, special-token spellings in the text are ordinary text.)");
  sub->add_option("--model", options->model_dir, "Model directory (holds tiktoken.model and tokenizer_config.json, or tokenizer.json)")
      ->required();
  sub->add_option("--text", options->text, "Text to tokenize (UTF-8)");
  sub->add_flag("--specials", options->specials,
                "Recognise special-token spellings such as <|open|> or <|im_end|> (default: all text is ordinary)");
  sub->add_flag("--json", options->json, "Print a JSON array instead of space-separated ids");
  sub->add_flag("--chat", options->chat, "Render --text as one user message with the model family's chat template");
  sub->add_option("--messages", options->messages, "Chat mode: the conversation as a JSON array of messages");
  sub->add_option("--tools", options->tools, "Chat mode: the tools field of a chat request (a JSON array)");
  sub->add_option("--tool-choice", options->tool_choice,
                  "Chat mode: tool_choice as JSON (\"auto\", \"none\", \"required\" or {\"type\":\"function\",...})");
  sub->add_option("--response-format", options->response_format, "Chat mode: response_format as JSON");
  sub->add_option("--reasoning-effort", options->effort, "Chat mode: thinking effort (OpenAI's levels; K3 maps them)")
      ->check(one_of({"minimal", "low", "medium", "high", "max"}))
      ->capture_default_str();
  sub->add_flag("--no-thinking", options->no_thinking, "Chat mode: non-thinking (response) generation prompt");
  sub->add_flag("--render", options->render, "Chat mode: also print the rendered template text");
  return {sub, [options]() -> int { return run_tokenize(*options); }};
}

}  // namespace deltafin::cli
