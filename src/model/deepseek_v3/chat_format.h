// The DeepSeek-V3 family's tokenizers and chat formats (model/common/
// chat_format.h), one per flavour of tokenizer_files.h, as the released chat
// templates render them (docs/deepseek-v3.md "Tokenizers and chat
// templates"; the template texts are deepseek_v3_chat_template()):
//
// DeepSeek V3 (V3-0324's template):
//   <｜begin▁of▁sentence｜>{systems joined by "\n\n"}
//   <｜User｜>{user}<｜Assistant｜>                       (a user turn opens the reply)
//   {answer}<｜end▁of▁sentence｜>                          (assistant history)
//   {content?}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{type}<｜tool▁sep｜>{name}\n```json\n{args}\n```<｜tool▁call▁end｜>
//     ("\n" before each further call) <｜tool▁calls▁end｜><｜end▁of▁sentence｜>
//   <｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{result}<｜tool▁output▁end｜>
//     ("\n" before each further result) <｜tool▁outputs▁end｜>
//   generation prompt: <｜Assistant｜> unless the last message is a user's
//   (already open) or a tool result (the model answers after
//   <｜tool▁outputs▁end｜>).
// DeepSeek R1 (R1's template): as V3's first template, the user turn without
//   <｜Assistant｜>, which opens each assistant turn and the generation
//   prompt, '<｜Assistant｜><think>\n'; history keeps only what follows the
//   last </think>; results after the first are not "\n"-separated.
// DeepSeek V3.1 (hybrid thinking): <｜User｜>{user}, then <｜Assistant｜> and
//   </think> (non-thinking) or <think> (thinking) opens the reply; history
//   turns always get </think> and drop what precedes their first </think>;
//   calls are {name}<｜tool▁sep｜>{args} without type or fences; results are
//   <｜tool▁output▁begin｜>{result}<｜tool▁output▁end｜> with no outputs
//   brackets, and no generation prompt follows them.
// Kimi K2 (K2-Instruct-0905's template): <|im_system|>tool_declare<|im_middle|>
//   with the tools, a default system turn when the first message is not a
//   system one, <|im_user|>{name or role}<|im_middle|>...<|im_end|>,
//   <|im_assistant|>...; calls <|tool_calls_section_begin|><|tool_call_begin|>
//   {id}<|tool_call_argument_begin|>{args}<|tool_call_end|>...
//   <|tool_calls_section_end|>; a result is a system-role turn
//   "## Return of {id}\n    {content}"; prompt <|im_assistant|>assistant<|im_middle|>.
//
// Where the templates are silent or would fail in Jinja (each also in the
// docs): a missing content is null; text parts are joined with "\n"
// (DeepSeek, as servers do for string templates) or "" (K2, as its template
// iterates them); tool_calls null or [] is no calls; arguments given as an
// object are written as Jinja's tojson, absent ones as {}; a call's type
// defaults to "function". R1's template never resets its "first call" and
// "first result" flags, so a second round of calls would lose
// <｜Assistant｜><｜tool▁calls▁begin｜>: here they reset at each assistant
// message, as V3-0324 does. K2 ids: an id that is not K2's own
// "functions.NAME:N" (a server's "call_..." id) is written as
// functions.NAME:N, N counting the conversation's calls (K2-Thinking's
// template does so for calls without an id), and a result's
// "## Return of" names the id its tool_call_id maps to.
//
// Tools: V3.1 declares request tools as its model card's tool description
// after the system prompt ("\n\n## Tools\n..." with each tool's name,
// description and json.dumps(parameters)); K2 as its template's tool_declare
// turn (tojson of the list). V3's and R1's templates declare no tools: a
// request with tools (tool_choice other than "none") is refused for them
// (ChatOptionError "tools"). tool_choice "none" leaves the declarations out;
// "required", a named function and response_format cannot be asked for and
// are refused. reasoning_effort has no knob in any of these templates.
// Thinking: V3 and K2-Instruct never think; R1 always opens <think> (the
// request's thinking=false cannot be expressed: R1 thinks, its reasoning goes
// to the reasoning channel); V3.1 follows the request.
//
// Tokens: the templates' structure tokens are their ids, message text is
// ordinary text (a spelling of <｜User｜> in a message stays text), as
// Qwen3ChatFormat does; otherwise the ids equal tokenizing the rendered
// string with the released tokenizer.
//
// Output: <think> ... </think> switch the reasoning channel (newlines at a
// block's start dropped, those before </think> too); a call section
// <｜tool▁calls▁begin｜> ... <｜tool▁calls▁end｜> (K2:
// <|tool_calls_section_begin|> ... <|tool_calls_section_end|>) yields one
// ToolCallDelta pair per call when the call closes: V3/R1
// "{type}<sep>{name}\n```json\n{args}\n```", V3.1 "{name}<sep>{args}", K2
// "{id}<arg_begin>{args}" with the name from "functions.NAME:N" (or
// "NAME:N"); arguments as the model wrote them. A call that does not parse,
// or is cut off by the end of generation, is shown as content as written;
// whitespace between calls is the template's separator and dropped.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/common/chat_format.h"
#include "model/deepseek_v3/tokenizer_files.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/token_text.h"
#include "tokenizer/tokenizer.h"

namespace deltafin {

// The flavour a checkpoint directory's files carry, and its chat template
// (nullopt: none, with why). Detection: tiktoken.model present, or
// config.json model_type "kimi_k2" -> Kimi K2; otherwise the chat template of
// tokenizer_config.json (or chat_template.jinja): a generation prompt
// '<｜Assistant｜></think>' -> V3.1, '<｜Assistant｜><think>' -> R1, else V3.
struct DeepSeekV3Detected {
  DsChatFlavor flavor = DsChatFlavor::DeepSeekV3;
  std::optional<std::string> chat_template;
  std::string no_template;  // why chat_template is missing
};
DeepSeekV3Detected detect_deepseek_v3_flavor(const std::string& dir);
// The flavour a chat template's text implies (the DeepSeek rules above).
DsChatFlavor deepseek_flavor_of_template(const std::string& chat_template);

// The chat format over a DeepSeek tokenizer.json (`source` names it in
// messages), or nullptr with `why` naming the file and the missing token.
std::unique_ptr<ChatFormat> make_deepseek_v3_chat_format(DsChatFlavor flavor, const HfTokenizer& tokenizer,
                                                         const TokenText& text, const std::string& source,
                                                         std::string* why);
// The same over Kimi K2's tiktoken tokenizer.
std::unique_ptr<ChatFormat> make_kimi_k2_chat_format(const Tokenizer& tokenizer, const TokenText& text,
                                                     const std::string& source, std::string* why);

// Kimi K2's tokenizer: DIR/tiktoken.model with the reserved ids of
// DIR/tokenizer_config.json (K2's named ones required), K3's pattern.
Tokenizer load_kimi_k2_tokenizer(const std::string& dir);

// Everything a family loader needs of the tokenizer (the loader keeps it
// whole: the chat format refers into it).
struct DeepSeekV3Tokenizer {
  DsChatFlavor flavor = DsChatFlavor::DeepSeekV3;
  std::string tokenizer_json;           // DeepSeek flavours: the file read (for hf_tokenizer_file())
  std::unique_ptr<HfTokenizer> hf;      // DeepSeek flavours
  std::unique_ptr<Tokenizer> tiktoken;  // Kimi K2
  std::unique_ptr<TokenText> text;
  std::unique_ptr<ChatFormat> chat;     // nullptr: no_chat says why
  std::string no_chat;
  size_t vocab_size() const { return text->vocab_size(); }
};
// Reads the tokenizer files of the checkpoint or store in `dir` and builds
// the flavour's chat format. Errors name the file and field.
std::unique_ptr<DeepSeekV3Tokenizer> load_deepseek_v3_tokenizer(const std::string& dir);

// `deltafin tokenize` for the family (FamilyTokenizer).
class DeepSeekV3FamilyTokenizer final : public FamilyTokenizer {
public:
  explicit DeepSeekV3FamilyTokenizer(const std::string& dir) : t_(load_deepseek_v3_tokenizer(dir)) {}
  std::vector<uint32_t> encode(const std::string& text, bool specials) const override;
  const ChatFormat* chat() const override { return t_->chat.get(); }
  std::string chat_missing() const override { return t_->no_chat; }
  std::string render_text(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const override;

private:
  std::unique_ptr<DeepSeekV3Tokenizer> t_;
};

}  // namespace deltafin
