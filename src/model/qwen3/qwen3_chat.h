// Qwen3's chat format: ChatML with <think> blocks, as the chat template in
// the released tokenizer_config.json of Qwen3 (Qwen3-30B-A3B, Qwen3-235B-
// A22B and the dense Qwen3 models) renders it (docs/qwen3-moe.md §Chat):
//
//   <|im_start|>system\n{system}<|im_end|>\n          (first message only)
//   <|im_start|>user\n{content}<|im_end|>\n
//   <|im_start|>assistant\n{content}<|im_end|>\n       (history)
//   <|im_start|>assistant\n                             (generation prompt)
//   + "<think>\n\n</think>\n\n" when thinking is off (enable_thinking=False)
//
// Assistant history: reasoning (reasoning_content, or what content holds
// before "</think>") is dropped from turns before the last user message;
// turns after it keep "<think>\n{reasoning}\n</think>\n\n" (always the last
// one). A system message that is not first renders like a user message.
// Content given as text parts is joined with "\n" (what servers do for
// string-only templates; the template itself would render it empty).
//
// Tokens: <|im_start|>, <|im_end|>, <think>, </think> written by the
// template are their ids; the text between them is encoded as one ordinary
// section, so the ids equal tokenizing the rendered string with the
// Hugging Face tokenizer — except that a spelling of an added token inside
// message text stays text here (a user cannot inject <|im_end|>).
// Tools (the template's tool path): with request tools, the system turn
// holds the first system message's content, "\n\n", and the template's
// "# Tools" text listing each tool as Jinja's tojson (json.dumps with ", "
// and ": ", keys as given). An assistant turn's tool_calls follow its
// content, each "<tool_call>\n{"name": "N", "arguments": A}\n</tool_call>"
// (a "\n" before every call but a first one after empty content), A being
// an arguments string as written or an object as tojson. A run of tool
// messages is one user turn of "\n<tool_response>\n{content}\n</tool_response>"
// blocks. tool_choice has no text in Qwen3's template: "auto" is the
// template as it is; "none" renders without the tool declarations (the model
// is offered nothing to call); "required" and a named function cannot be
// asked for, and deltafin does not constrain decoding, so they are refused
// (ChatOptionError), as is a response_format.
//
// Output calls: a "<tool_call>" ... "</tool_call>" block (the added tokens)
// holding {"name": string, "arguments": object} becomes one tool call, its
// arguments re-serialised as json.dumps does (", ", ": "); it comes as one
// piece when the block closes. A block that does not hold such JSON, or is
// not closed when generation ends, is shown as content as written.
//
// Output: the model opens its reasoning with <think> (thinking on) and
// closes it with </think>; the reasoning channel gets what is between them
// without its leading and trailing newlines (as the template strips
// history), the content what follows without its leading newlines. Other
// added tokens are shown as their spelling.
#pragma once

#include <optional>
#include <string>

#include "model/common/chat_format.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/token_text.h"

namespace deltafin {

struct Qwen3ChatTokens {
  uint32_t im_start = 0, im_end = 0, think = 0, end_think = 0;
  std::optional<uint32_t> end_of_text;  // <|endoftext|>, when the tokenizer has it
  // <tool_call>, </tool_call>, <tool_response>, </tool_response>: added
  // tokens of the released tokenizer. Without them the template's tags are
  // plain text (as Hugging Face would tokenise them) and no call is parsed.
  std::optional<uint32_t> tool_call, end_tool_call, tool_response, end_tool_response;
};

// The chat tokens of `tokenizer`, or nullopt with `why` set when one is
// missing (a base model's tokenizer without <think>, say).
std::optional<Qwen3ChatTokens> qwen3_chat_tokens(const HfTokenizer& tokenizer, std::string* why);

class Qwen3ChatFormat;
// Qwen3's chat format over `tokenizer` (read from `tokenizer_json`), or
// nullptr with `why` naming the file and the missing chat token.
std::unique_ptr<Qwen3ChatFormat> make_qwen3_chat_format(const HfTokenizer& tokenizer, const TokenText& text,
                                                        const std::string& tokenizer_json, std::string* why);

class Qwen3ChatFormat final : public ChatFormat {
public:
  // Keeps references; `text` is a view of `tokenizer`.
  Qwen3ChatFormat(const HfTokenizer& tokenizer, const TokenText& text, Qwen3ChatTokens ids)
      : tok_(tokenizer), text_(text), ids_(ids) {}
  RenderedChat render(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const override;
  std::unique_ptr<ChatOutput> output(bool thinking) const override;
  // <|im_end|>, and <|endoftext|> when the tokenizer has it (the released
  // generation_config.json lists both).
  std::vector<uint32_t> end_tokens() const override;

private:
  const HfTokenizer& tok_;
  const TokenText& text_;
  Qwen3ChatTokens ids_;
};

// A Hugging Face tokenizer.json with Qwen3's chat format when it has the
// chat tokens (FamilyTokenizer).
class Qwen3FamilyTokenizer final : public FamilyTokenizer {
public:
  explicit Qwen3FamilyTokenizer(const std::string& tokenizer_json);
  std::vector<uint32_t> encode(const std::string& text, bool specials) const override { return tok_.encode(text, specials); }
  const ChatFormat* chat() const override { return chat_.get(); }
  std::string chat_missing() const override { return why_; }
  std::string render_text(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const override;

private:
  HfTokenizer tok_;
  std::unique_ptr<TokenText> text_;
  std::string why_;  // before chat_: its constructor fills it
  std::unique_ptr<Qwen3ChatFormat> chat_;
};

}  // namespace deltafin
