// K3ChatOutput (model/common/chat_format.h's ChatOutput for K3): a K3 assistant turn is XTML (k3-model.md §9.5):
//   reasoning <|close|>think<|sep|> <|open|>response<|sep|> answer
//   <|close|>response<|sep|> <|close|>message<|sep|> <|end_of_msg|>
// The parser works on token ids, not on text, so an answer that merely
// spells "<|close|>" in ordinary tokens stays answer text. Structural tags
// (open/close of think and response, close of message) switch channels and
// are not shown; any other tag, or any other special token, is shown in the
// current channel as its spelling, so nothing the model wrote is dropped.
// Text outside both blocks (between them, after close(message)) goes to
// content. Each channel decodes UTF-8 incrementally (StreamDecoder).
//
// Tags: <|open|> or <|close|> starts one; it and the tokens after it are
// held back until <|sep|>, and the decoded tokens between are the tag text:
// a name, then attributes ` key="value"` (values with &quot; and &amp;
// escaped, as the renderer writes them).
// Structural (hidden): open(think) -> reasoning; open(response),
// close(think), close(response), close(message) -> content, whatever the
// current channel. Anything else is shown verbatim (the spelling of every
// held token, through the current channel's decoder): an unknown name such
// as open(tools) or one with attributes, a held run that meets another
// special token (shown at once, with it), a held run of more than 64 tokens
// without <|sep|>, or one cut by a new <|open|>/<|close|> (which then starts
// the next tag). Outside a tag, a stray <|sep|> or any other special token
// is shown as its spelling. So for ids without structural tags, the text a
// channel receives equals Tokenizer::decode of the ids it consumed.
// Switching channels flushes the old channel's decoder, so a UTF-8 fragment
// left dangling there becomes U+FFFD. A delta never has text in both
// channels (a switch releases only the old channel's bytes), so the order of
// the two fields does not matter.
// Tool calls (§9.3, what the renderer writes for history's tool_calls):
//   open(tools) [ open(call tool="NAME" index="I")
//     ( open(argument key="K" type="T") value close(argument)
//     | open(json type="object") raw close(json) )* close(call) ]* close(tools)
// become ToolCallDelta pieces: open(call) begins call #n with NAME; each
// argument adds `"K": value` to an arguments object, the value JSON-escaped
// into a string when T is "string" and written as the model wrote it
// otherwise (it should be JSON; it is not checked); a json block's raw text
// is the arguments as written; close(call) closes the object and ends the
// call. The arguments text therefore grows as the model writes it, and is
// valid JSON exactly when the model's non-string values are.
// Malformed markup is never dropped and never guessed at:
//   - a close tag of an enclosing block closes the blocks open inside it
//     (close(call) inside an argument ends the argument first; close(tools)
//     or close(message) ends the call), as an HTML parser would;
//   - text or unknown tags between calls, or inside a call but outside an
//     argument, go to content, shown as written;
//   - open(call) without a tool name, or an argument without a key, is an
//     unknown tag (shown);
//   - a call still open when generation ends keeps the arguments written so
//     far and gets no `ends` piece.
// reasoning_tokens counts each token consumed while the channel is
// reasoning, before any switch it causes: the three tokens of close(think)
// count, the tokens of open(think) written from content do not.
//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/common/chat_format.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

class K3ChatOutput final : public ChatOutput {
public:
  // thinking: the prompt ended with open(think), so generation starts in the
  // reasoning channel; otherwise it ended with open(response) (content).
  K3ChatOutput(const Tokenizer& tokenizer, bool thinking);

  ChatDelta push(uint32_t id) override;
  // End of generation: held-back bytes (a dangling UTF-8 fragment becomes
  // U+FFFD, an unfinished tag is shown as its text).
  ChatDelta flush() override;
  int64_t reasoning_tokens() const override { return reasoning_tokens_; }

private:
  enum class Channel { Reasoning, Content };
  // Where in a tools block the parser is; None outside one.
  enum class ToolState { None, Block, Call, Argument, RawJson };
  void emit(uint32_t id, ChatDelta& out);
  void finish_tag(ChatDelta& out);
  bool tool_tag(bool is_open, const std::string& text, ChatDelta& out);  // false: not a tool tag here
  void show_tag(ChatDelta& out);  // the held tag tokens as text, in the current channel
  void switch_to(Channel channel, ChatDelta& out);
  void argument_text(const std::string& text, ChatDelta& out);
  void end_argument(ChatDelta& out);
  void end_call(ChatDelta& out);

  const Tokenizer* tok_;
  Channel channel_;
  StreamDecoder reasoning_, content_, arguments_;
  std::vector<uint32_t> tag_;  // an open/close token and what followed it, until <|sep|>
  uint32_t open_id_, close_id_, sep_id_;
  int64_t reasoning_tokens_ = 0;
  ToolState tools_ = ToolState::None;
  size_t calls_ = 0;            // calls begun in this turn
  bool object_open_ = false;    // "{" written for the current call
  bool raw_written_ = false;    // the current call had a json block
  bool string_value_ = false;   // the current argument's type is "string"
};

}  // namespace deltafin
