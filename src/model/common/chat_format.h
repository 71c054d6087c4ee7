// A family's chat format: how a message list becomes prompt tokens (its chat
// template) and how the tokens of an assistant turn split into what an API
// shows (reasoning and answer). The server and `run --chat` use only this;
// K3's XTML lives in model/kimi_k3/chat_format.h, Qwen3's ChatML with
// <think> blocks in model/qwen3/qwen3_chat.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace deltafin {

struct ChatTurnOptions {
  bool thinking = true;  // the answer starts with a reasoning block
  // OpenAI's reasoning_effort ("minimal", "low", "medium", "high", "max");
  // unset: the family's default. A family maps it onto its template (K3's
  // low, high, max) or has no such knob and ignores it (Qwen3: thinking on
  // or off only).
  std::optional<std::string> reasoning_effort;
  // The request's tool declarations (null or a non-empty array of OpenAI
  // {"type": "function", "function": {name, description?, parameters?}}),
  // tool_choice (null, "auto", "none", "required" or {"type": "function",
  // "function": {"name"}}) and response_format (null or {"type": "text" |
  // "json_object" | "json_schema", ...}), validated by the API layer. A
  // family renders what its template can express and refuses the rest with
  // a ChatOptionError naming the field.
  nlohmann::ordered_json tools, tool_choice, response_format;
};

// A request option the family's template cannot express: `field` is the
// request field ("tool_choice", "response_format.type", ...).
class ChatOptionError : public Error {
public:
  ChatOptionError(std::string field, const std::string& message) : Error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

private:
  std::string field_;
};

struct RenderedChat {
  std::vector<uint32_t> tokens;
  bool thinking = false;  // generation starts inside the reasoning block
};

// A piece of one tool call the model is writing. A call's first piece has
// `begins` and its function name; later ones carry its arguments (a JSON
// object's text, in pieces as the model writes them); the last has `ends`
// (a call cut off by the end of generation never gets one).
struct ToolCallDelta {
  size_t index = 0;  // the call's number in the turn, from 0
  bool begins = false;
  bool ends = false;
  std::string name;       // with `begins`
  std::string arguments;  // the next piece of the arguments text

  bool operator==(const ToolCallDelta&) const = default;
};

// Text to show after one token, per channel, and tool-call pieces.
struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// One assistant turn's tokens -> text, incrementally (UTF-8 is decoded as it
// completes; structure tokens switch channels and are not shown).
class ChatOutput {
public:
  virtual ~ChatOutput() = default;
  // One generated token (never the end-of-turn token: the caller stops there).
  virtual ChatDelta push(uint32_t id) = 0;
  // End of generation: whatever was held back.
  virtual ChatDelta flush() = 0;
  // Tokens consumed while in the reasoning channel (usage.reasoning_tokens).
  virtual int64_t reasoning_tokens() const = 0;
};

class ChatFormat {
public:
  virtual ~ChatFormat() = default;
  // Renders an OpenAI-style message list (validated by the API layer) with
  // the generation prompt. Throws deltafin::Error naming the offending
  // message or field for what the template cannot express.
  virtual RenderedChat render(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const = 0;
  // The parser for the turn that follows a render() with `thinking`.
  virtual std::unique_ptr<ChatOutput> output(bool thinking) const = 0;
  // The tokens that end an assistant turn, the usual one first.
  virtual std::vector<uint32_t> end_tokens() const = 0;
};

// A family's tokenizer alone (no weights), for `deltafin tokenize`: ordinary
// or special-aware encoding, and its chat format.
class FamilyTokenizer {
public:
  virtual ~FamilyTokenizer() = default;
  // specials: spellings of special tokens in `text` become their ids.
  virtual std::vector<uint32_t> encode(const std::string& text, bool specials) const = 0;
  virtual const ChatFormat* chat() const = 0;  // nullptr: chat_missing() says why
  virtual std::string chat_missing() const { return ""; }
  // The rendered chat as text (for display: K3's segments joined, Qwen3's ids decoded).
  virtual std::string render_text(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const = 0;
};

}  // namespace deltafin
