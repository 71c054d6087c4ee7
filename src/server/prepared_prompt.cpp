#include "server/prepared_prompt.h"

#include "util/error.h"

namespace deltafin {

using api::ApiError;

PreparedPrompt prepare_prompt(const Engine& engine, const api::GenerationRequest& r) {
  PreparedPrompt p;
  p.chat = r.endpoint == api::Endpoint::Chat;
  if (p.chat) {
    const ChatFormat* chat = engine.chat();
    if (!chat) throw ApiError(400, "This model has no chat format: " + engine.chat_missing(), "messages", "no_chat_template");
    ChatTurnOptions o;
    o.thinking = r.thinking;  // a reasoning block first; reasoning_effort, where the family has levels, sets its length
    o.reasoning_effort = r.reasoning_effort;
    o.tools = r.tools;
    o.tool_choice = r.tool_choice;
    o.response_format = r.response_format;
    try {
      RenderedChat rendered = chat->render(r.messages, o);
      p.tokens = std::move(rendered.tokens);
      p.thinking = rendered.thinking;
    } catch (const ChatOptionError& e) {
      throw ApiError(400, cat("Unsupported value for '", e.field(), "': ", e.what()), e.field(), "unsupported_value");
    } catch (const Error& e) {
      throw ApiError(400, std::string("messages: ") + e.what(), "messages", "invalid_messages");
    }
  } else if (r.prompt_text) {
    try {
      p.tokens = engine.text().encode_ordinary(*r.prompt_text);  // raw mode: no BOS
    } catch (const Error& e) {
      throw ApiError(400, std::string("prompt: ") + e.what(), "prompt", "invalid_prompt");
    }
  } else {
    p.tokens = r.prompt_ids;
  }
  const int64_t n = static_cast<int64_t>(p.tokens.size());
  if (n == 0) throw ApiError(400, "The prompt encodes to no tokens", p.chat ? "messages" : "prompt", "empty_prompt");
  const int64_t limit = engine.context_limit();
  if (n >= limit)
    throw ApiError(400,
                   cat("This server's maximum context length is ", limit, " tokens; the prompt has ", n,
                       " tokens, leaving no room to generate. Its session would need ", engine.session_bytes(n + 1, n),
                       " bytes of memory; the session budget is ", engine.session_budget_bytes(), " bytes (",
                       engine.session_bytes_per_position(), " per position; the model's own limit is ",
                       engine.model_context(), " tokens)"),
                   p.chat ? "messages" : "prompt", "context_length_exceeded");
  p.max_new = std::min(r.max_tokens.value_or(engine.max_tokens_ceiling()), limit - n);
  return p;
}

}  // namespace deltafin
