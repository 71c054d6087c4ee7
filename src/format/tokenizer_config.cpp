#include "format/tokenizer_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {

// A spelling for messages, with non-printable bytes shown as \xNN.
std::string show_spelling(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + "\"";
}

// A decimal id key of added_tokens_decoder: digits only, no leading zeros, so
// one id has one spelling of its key. Returns false otherwise.
bool parse_id_key(const std::string& key, uint64_t* id) {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *id = v;
  return true;
}

}  // namespace

const std::vector<RequiredSpecial>& required_specials() {
  static const std::vector<RequiredSpecial> table = {
      {reserved::kBos, "[BOS]"},
      {reserved::kEosText, "[EOS]"},
      {reserved::kEndOfMsg, "<|end_of_msg|>"},
      {reserved::kOpen, "<|open|>"},
      {reserved::kClose, "<|close|>"},
      {reserved::kSep, "<|sep|>"},
      {reserved::kStartHeader, "[start_header_id]"},
      {reserved::kEndHeader, "[end_header_id]"},
      {reserved::kEot, "[EOT]"},
      {reserved::kMediaBegin, "<|media_begin|>"},
      {reserved::kMediaContent, "<|media_content|>"},
      {reserved::kMediaEnd, "<|media_end|>"},
      {reserved::kMediaPad, "<|media_pad|>"},
      {reserved::kOsagentMode, "<osagent_mode>"},
      {reserved::kUnk, "[UNK]"},
      {reserved::kPad, "[PAD]"},
  };
  return table;
}

std::string default_reserved_spelling(uint32_t id) { return cat("<|reserved_token_", id, "|>"); }

SpecialTokens k3_special_tokens(uint32_t base) {
  SpecialTokens s;
  s.base = base;
  for (uint32_t i = 0; i < kReservedTokenCount; ++i) s.spellings.push_back(default_reserved_spelling(base + i));
  for (const RequiredSpecial& r : required_specials()) s.spellings[r.offset] = r.spelling;
  return s;
}

void validate_special_tokens(const SpecialTokens& specials, const std::string& source) {
  validate_special_tokens(specials, source, required_specials());
}

void validate_special_tokens(const SpecialTokens& specials, const std::string& source,
                             const std::vector<RequiredSpecial>& required) {
  if (specials.spellings.size() != kReservedTokenCount)
    fail(source, ": expected ", kReservedTokenCount, " reserved tokens, found ", specials.spellings.size());
  if (specials.base > 0xffffffffu - kReservedTokenCount) fail(source, ": base id ", specials.base, " is too large");
  for (uint32_t i = 0; i < kReservedTokenCount; ++i) {
    const std::string& s = specials.spellings[i];
    if (s.empty()) fail(source, ": special token ", specials.base + i, " has an empty spelling");
    for (char c : s)
      if (static_cast<unsigned char>(c) >= 0x80)
        fail(source, ": special token ", specials.base + i, " spelling ", show_spelling(s), " is not ASCII");
  }
  for (const RequiredSpecial& r : required)
    if (specials.spellings[r.offset] != r.spelling)
      fail(source, ": special token ", specials.base + r.offset, " (base+", r.offset, ") must be spelled ",
           r.spelling, ", found ", show_spelling(specials.spellings[r.offset]));

  // Sorted, a spelling that is a prefix of another sits right before some
  // spelling it prefixes (everything between them shares the prefix), so
  // checking neighbours finds every duplicate and every prefix pair.
  std::vector<uint32_t> order(kReservedTokenCount);
  for (uint32_t i = 0; i < kReservedTokenCount; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return specials.spellings[a] < specials.spellings[b]; });
  for (size_t k = 1; k < order.size(); ++k) {
    const std::string& a = specials.spellings[order[k - 1]];
    const std::string& b = specials.spellings[order[k]];
    uint32_t ida = specials.base + order[k - 1], idb = specials.base + order[k];
    if (a == b) fail(source, ": duplicate special spelling ", show_spelling(a), " for ids ", std::min(ida, idb), " and ",
                     std::max(ida, idb));
    if (b.compare(0, a.size(), a) == 0)
      fail(source, ": special spelling ", show_spelling(a), " (id ", ida, ") is a prefix of ", show_spelling(b), " (id ", idb,
           "), so the text ", show_spelling(b), " would be ambiguous");
  }
}

SpecialTokens parse_tokenizer_config(std::string_view json_text, uint32_t base, const std::string& source) {
  return parse_tokenizer_config(json_text, base, source, required_specials());
}

SpecialTokens parse_tokenizer_config(std::string_view json_text, uint32_t base, const std::string& source,
                                     const std::vector<RequiredSpecial>& required) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number out of range (1e999)
    fail(source, ": not valid JSON: ", e.what());
  }
  if (!doc.is_object()) fail(source, ": the root is not a JSON object");

  SpecialTokens specials;
  specials.base = base;
  for (uint32_t i = 0; i < kReservedTokenCount; ++i) specials.spellings.push_back(default_reserved_spelling(base + i));

  if (doc.contains("added_tokens_decoder")) {
    const nlohmann::json& decoder = doc.at("added_tokens_decoder");
    if (!decoder.is_object()) fail(source, ": field added_tokens_decoder is not a JSON object");
    for (auto it = decoder.begin(); it != decoder.end(); ++it) {
      std::string field = cat("added_tokens_decoder[\"", it.key(), "\"]");
      uint64_t id = 0;
      if (!parse_id_key(it.key(), &id)) fail(source, ": field ", field, ": key is not a decimal token id");
      if (id < base || id >= static_cast<uint64_t>(base) + kReservedTokenCount)
        fail(source, ": field ", field, ": special id ", id, " is outside the reserved range ", base, "..",
             base + kReservedTokenCount - 1, " (base = number of tiktoken ranks)");
      const nlohmann::json& entry = it.value();
      if (!entry.is_object() || !entry.contains("content"))
        fail(source, ": field ", field, " must be an object with a \"content\" string");
      const nlohmann::json& content = entry.at("content");
      if (!content.is_string()) fail(source, ": field ", field, ".content is not a string");
      specials.spellings[id - base] = content.get<std::string>();
    }
  }
  validate_special_tokens(specials, source, required);
  return specials;
}

SpecialTokens read_tokenizer_config(const std::string& path, uint32_t base) {
  return parse_tokenizer_config(read_text_file(path), base, path);
}

std::string make_tokenizer_config_json(uint32_t base, uint64_t model_max_length) {
  SpecialTokens specials = k3_special_tokens(base);
  validate_special_tokens(specials, "generated tokenizer_config.json");
  nlohmann::ordered_json decoder = nlohmann::ordered_json::object();
  for (const RequiredSpecial& r : required_specials()) {
    nlohmann::ordered_json entry;
    entry["content"] = r.spelling;
    entry["lstrip"] = false;
    entry["normalized"] = false;
    entry["rstrip"] = false;
    entry["single_word"] = false;
    entry["special"] = true;
    decoder[std::to_string(base + r.offset)] = entry;
  }
  nlohmann::ordered_json doc;
  doc["added_tokens_decoder"] = decoder;
  doc["bos_token"] = specials.spellings[reserved::kBos];
  // The model's EOS is <|end_of_msg|> (config.json eos_token_id = base + 2).
  doc["eos_token"] = specials.spellings[reserved::kEndOfMsg];
  doc["pad_token"] = specials.spellings[reserved::kPad];
  doc["unk_token"] = specials.spellings[reserved::kUnk];
  doc["clean_up_tokenization_spaces"] = false;
  doc["model_max_length"] = model_max_length;
  doc["tokenizer_class"] = "TikTokenTokenizer";
  return doc.dump(2) + "\n";
}

}  // namespace deltafin
