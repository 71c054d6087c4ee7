// The tokenizer files of the DeepSeek-V3 family as released, for generated
// checkpoints (docs/deepseek-v3.md "Tokenizers and chat templates"):
//
// DeepSeek V3 / R1 / V3.1: tokenizer.json (byte-level BPE: three Split
// regexes in sequence, then ByteLevel without its own regex; no normaliser)
// and tokenizer_config.json (LlamaTokenizerFast, add_bos_token, the chat
// template). <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜> and <｜▁pad▁｜> are
// ids 0, 1, 2, in the vocab and added tokens both; the chat tokens follow the
// BPE vocabulary in the release's order (<think> and </think> for R1 and
// V3.1, where the release has them right before <｜fim▁hole｜>).
//
// Kimi K2: tiktoken.model (ranks, K3's pre-tokenizer pattern, which K3
// inherited from K2) and tokenizer_config.json whose added_tokens_decoder
// names K2's reserved tokens after the ranks (<|im_end|> at base + 2, ...,
// <|im_middle|> at base + 17), with K2-Instruct-0905's chat template.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/tokenizer_config.h"

namespace deltafin {

// Which release's tokenizer and chat template a checkpoint carries.
enum class DsChatFlavor { DeepSeekV3, DeepSeekR1, DeepSeekV31, KimiK2 };

// "deepseek_v3", "deepseek_r1", "deepseek_v31", "kimi_k2".
const char* ds_chat_flavor_name(DsChatFlavor flavor);
// The flavour of a name above; an error listing the names otherwise.
DsChatFlavor parse_ds_chat_flavor(const std::string& name);

// DeepSeek V3's pre-tokenizer: three Split (Isolated) regexes applied in
// turn, each refining the pieces of the one before: runs of 1-3 digits, runs
// of CJK ideographs and kana, then punctuation / letters / whitespace.
// As tokenizer.json writes them (Oniguruma syntax, compiled here through
// pretokenizer.h's translation).
extern const char* const kDeepSeekV3Splits[3];
// The pieces BPE runs on (what the chain gives; the pieces concatenate back
// to `text`). For training and tests; encoding goes through HfTokenizer.
std::vector<std::string> deepseek_v3_pretokenize(std::string_view text);

// The chat template the flavour's tokenizer_config.json carries, as released
// (the sources each was transcribed from are in the .cpp).
const std::string& deepseek_v3_chat_template(DsChatFlavor flavor);

// The added tokens after the BPE vocabulary, in order, for a DeepSeek flavour
// (ids 0..2 come first and are not listed). Empty for Kimi K2.
struct DeepSeekAddedToken {
  const char* content;
  bool special;
};
std::vector<DeepSeekAddedToken> deepseek_v3_added_tokens(DsChatFlavor flavor);

// Kimi K2's named reserved tokens (offsets from the first reserved id).
const std::vector<RequiredSpecial>& kimi_k2_required_specials();

// Writes the flavour's tokenizer files into `dir` (atomically) for a model
// whose embedding has `vocab_size` rows, every id a token: DeepSeek: 3
// specials + 256 bytes + merges, then the added tokens; Kimi K2: vocab_size -
// 256 ranks, then K2's 256 reserved ids. The BPE vocabulary is trained on the
// built-in text with the flavour's own pre-tokenizer. Throws naming the
// problem when vocab_size leaves no room for a merge.
void write_deepseek_v3_tokenizer_files(const std::string& dir, DsChatFlavor flavor, int64_t vocab_size);

}  // namespace deltafin
