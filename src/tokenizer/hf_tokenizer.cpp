#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/nfc.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {

using nlohmann::json;

// A JSON value with the file it came from and its path in the document
// ("model.merges[3]"), so that every refusal names both.
class Field {
public:
  Field(const std::string& file, std::string path, const json& value)
      : file_(&file), path_(std::move(path)), value_(&value) {}

  const json& value() const { return *value_; }
  const std::string& path() const { return path_; }

  template <typename... Args>
  [[noreturn]] void fail_here(Args&&... args) const {
    fail(*file_, ": ", path_, " ", std::forward<Args>(args)...);
  }

  bool has(const char* key) const { return value_->is_object() && value_->contains(key); }
  bool is_null() const { return value_->is_null(); }

  // A member; `required` members that are absent are an error, optional ones
  // read as null.
  Field operator[](const char* key) const {
    if (!value_->is_object()) fail_here("is not an object");
    static const json null_value;
    auto it = value_->find(key);
    return Field(*file_, child_path(key), it == value_->end() ? null_value : *it);
  }
  Field required(const char* key) const {
    if (!value_->is_object()) fail_here("is not an object");
    if (!value_->contains(key)) fail(*file_, ": ", child_path(key), " is missing");
    return (*this)[key];
  }
  Field at(size_t i) const { return Field(*file_, cat(path_, "[", i, "]"), (*value_)[i]); }

  const std::string& string() const {
    if (!value_->is_string()) fail_here("is not a string");
    return value_->get_ref<const std::string&>();
  }
  bool boolean() const {
    if (!value_->is_boolean()) fail_here("is not a boolean");
    return value_->get<bool>();
  }
  // An optional boolean: null/absent gives `fallback`.
  bool boolean_or(bool fallback) const { return is_null() ? fallback : boolean(); }
  uint32_t id() const {
    if (!value_->is_number_unsigned() || value_->get<uint64_t>() >= 0xffffffffull)
      fail_here("is not a token id (an integer from 0 to 4294967294)");
    return value_->get<uint32_t>();
  }
  size_t array_size() const {
    if (!value_->is_array()) fail_here("is not an array");
    return value_->size();
  }

  // Refuses members this class does not know, so none is silently ignored.
  void only_keys(std::initializer_list<const char*> known) const {
    if (!value_->is_object()) fail_here("is not an object");
    for (auto it = value_->begin(); it != value_->end(); ++it) {
      bool ok = std::any_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; });
      if (!ok) fail(*file_, ": ", child_path(it.key().c_str()), " is not supported");
    }
  }
  // The object's "type", which must be one of `supported`.
  std::string type(std::initializer_list<const char*> supported) const {
    Field t = required("type");
    const std::string& name = t.string();
    for (const char* s : supported)
      if (name == s) return name;
    t.fail_here("\"", name, "\" is not supported");
  }
  // A member that must be null or absent (a feature this class lacks).
  void must_be_null(const char* key) const {
    Field f = (*this)[key];
    if (!f.is_null()) f.fail_here(f.value().dump(), " is not supported (only null)");
  }
  // A member that must be `expected` (absent/null reads as `fallback`).
  void must_be(const char* key, bool expected, bool fallback) const {
    Field f = (*this)[key];
    if (f.boolean_or(fallback) != expected)
      f.fail_here(expected ? "false" : "true", " is not supported (only ", expected ? "true" : "false", ")");
  }
  // A string member that must be empty (or absent/null).
  void must_be_empty(const char* key) const {
    Field f = (*this)[key];
    if (!f.is_null() && !f.string().empty()) f.fail_here("\"", f.string(), "\" is not supported (only \"\")");
  }

private:
  std::string child_path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string* file_;
  std::string path_;
  const json* value_;
};

// A string as a JSON literal, quoted and escaped, for messages.
std::string escaped(const std::string& s) { return json(s).dump(); }

// What the ByteLevel decoder makes of a token string: each character's byte,
// or, when some character is outside the alphabet, the string's own UTF-8
// bytes (tokenizers' ByteLevel::decode_chain does exactly this).
std::string byte_level_decode_token(const std::string& s) {
  std::optional<std::string> bytes = byte_level_to_bytes(s);
  return bytes ? *bytes : s;
}

uint64_t pair_key(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }

}  // namespace

HfTokenizer HfTokenizer::load(const std::string& path) { return parse(read_text_file(path), path); }

HfTokenizer HfTokenizer::parse(std::string_view text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
  if (!doc.is_object()) fail(path, ": the top level is not a JSON object");
  Field root(path, "", doc);
  root.only_keys({"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                  "post_processor", "decoder", "model"});
  {
    Field v = root["version"];
    if (!v.is_null() && v.string() != "1.0") v.fail_here("\"", v.string(), "\" is not supported (only \"1.0\")");
  }
  // Truncation and padding would change the ids encode returns.
  root.must_be_null("truncation");
  root.must_be_null("padding");

  HfTokenizer t;

  // ---- model: BPE over a byte-level vocab ----
  Field model = root.required("model");
  model.only_keys({"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                   "byte_fallback", "ignore_merges", "vocab", "merges"});
  model.type({"BPE"});
  model.must_be_null("dropout");    // random merges skipped: not reproducible
  model.must_be_null("unk_token");  // every byte has a token, so no unknown token
  model.must_be_empty("continuing_subword_prefix");
  model.must_be_empty("end_of_word_suffix");
  model.must_be("byte_fallback", false, false);
  { Field f = model["fuse_unk"]; (void)f.boolean_or(false); }  // only acts on unk tokens, which there are none of
  t.ignore_merges_ = model["ignore_merges"].boolean_or(false);

  Field vocab = model.required("vocab");
  if (!vocab.value().is_object()) vocab.fail_here("is not an object");
  std::vector<std::string> tokens(vocab.value().size());
  std::vector<bool> seen(tokens.size(), false);
  for (auto it = vocab.value().begin(); it != vocab.value().end(); ++it) {
    Field entry(path, cat(vocab.path(), "[", escaped(it.key()), "]"), it.value());
    uint32_t id = entry.id();
    // Ids 0..n-1, each once: the vocab is the rank table of the merge loop.
    if (id >= tokens.size())
      entry.fail_here("is id ", id, ", but the ", tokens.size(), " vocab ids must be 0..", tokens.size() - 1);
    if (seen[id]) entry.fail_here("is id ", id, ", which another vocab token already has");
    if (it.key().empty()) entry.fail_here("is an empty token");
    std::optional<std::string> bytes = byte_level_to_bytes(it.key());
    if (bytes) {
      tokens[id] = std::move(*bytes);
    } else {
      // A key with a character outside the byte map (DeepSeek V3 lists its
      // added tokens <｜begin▁of▁sentence｜>... in the vocab too) is a token
      // no byte-level piece can ever be: BPE never reaches it, only the
      // added-token matcher can. Its table entry is a placeholder holding
      // 0xff 0xfe, which no valid UTF-8 text (every piece BPE sees) contains,
      // and which no merge can make: a byte-level token of those bytes would
      // be a duplicate the RankTable refuses. What it decodes to is its own
      // UTF-8, as the ByteLevel decoder gives for a string outside the
      // alphabet.
      if (utf8_invalid_offset(it.key()) != kUtf8Valid) entry.fail_here("is not valid UTF-8");
      tokens[id] = cat("\xff\xfe", id, "\xff");
      t.unreachable_[id] = it.key();
    }
    seen[id] = true;
  }
  try {
    t.vocab_ = RankTable(std::move(tokens));
  } catch (const Error& e) {
    vocab.fail_here("has two tokens with the same bytes: ", e.what());
  }
  for (int b = 0; b < 256; ++b) {
    std::string single(1, static_cast<char>(b));
    if (t.vocab_.find(single) == kNoRank)
      vocab.fail_here("lacks the byte-level token ", escaped(bytes_to_byte_level(single)), " of byte ", b,
                      " (every byte needs one)");
  }

  Field merges = model.required("merges");
  size_t n_merges = merges.array_size();
  t.merges_.reserve(n_merges);
  for (size_t i = 0; i < n_merges; ++i) {
    Field m = merges.at(i);
    std::string left, right;
    if (m.value().is_string()) {
      // The older format, "a b": byte-level tokens never hold a real space.
      const std::string& s = m.string();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos || space == 0 ||
          space + 1 == s.size())
        m.fail_here(escaped(s), " is not two tokens separated by one space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.value().is_array()) {
      if (m.array_size() != 2) m.fail_here("is not a pair [left, right]");
      left = m.at(0).string();
      right = m.at(1).string();
    } else {
      m.fail_here("is neither a string \"a b\" nor a pair [a, b]");
    }
    auto lookup = [&](const std::string& token) {
      std::optional<std::string> bytes = byte_level_to_bytes(token);
      uint32_t id = bytes ? t.vocab_.find(*bytes) : kNoRank;
      if (id == kNoRank) m.fail_here("uses ", escaped(token), ", which is not in model.vocab");
      return id;
    };
    uint32_t l = lookup(left), r = lookup(right);
    if (t.vocab_.find(t.vocab_.bytes(l) + t.vocab_.bytes(r)) == kNoRank)
      m.fail_here("joins to ", escaped(left + right), ", which is not in model.vocab");
    // A repeated pair takes its later rank, as tokenizers' HashMap collect does.
    t.merges_[pair_key(l, r)] = static_cast<uint32_t>(i);
  }

  // ---- normalizer ----
  // NFC, or a Sequence of them (DeepSeek V3 writes an empty Sequence: no
  // normalisation at all).
  Field normalizer = root["normalizer"];
  if (!normalizer.is_null()) {
    if (normalizer.type({"NFC", "Sequence"}) == "NFC") {
      normalizer.only_keys({"type"});
      t.nfc_ = true;
    } else {
      normalizer.only_keys({"type", "normalizers"});
      Field list = normalizer.required("normalizers");
      for (size_t i = 0; i < list.array_size(); ++i) {
        Field member = list.at(i);
        member.only_keys({"type"});
        member.type({"NFC"});
        t.nfc_ = true;
      }
    }
  }

  // ---- pre_tokenizer: Split(s), then ByteLevel ----
  Field pre = root.required("pre_tokenizer");
  std::vector<Field> steps;
  if (pre.is_null()) pre.fail_here("is null; a ByteLevel pre-tokenizer is required");
  if (pre.type({"Sequence", "ByteLevel"}) == "Sequence") {
    pre.only_keys({"type", "pretokenizers"});
    Field list = pre.required("pretokenizers");
    for (size_t i = 0; i < list.array_size(); ++i) steps.push_back(list.at(i));
  } else {
    steps.push_back(pre);
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const Field& step = steps[i];
    bool last = i + 1 == steps.size();
    std::string type = step.type({"Split", "ByteLevel"});
    if (type == "Split") {
      if (last) step.fail_here("is a Split last; the sequence must end with ByteLevel");
      step.only_keys({"type", "pattern", "behavior", "invert"});
      Field pattern = step.required("pattern");
      pattern.only_keys({"Regex", "String"});
      if (!pattern.has("Regex")) pattern.fail_here("is not a {\"Regex\": ...} (String patterns are not supported)");
      Field behavior = step.required("behavior");
      if (behavior.string() != "Isolated")
        behavior.fail_here("\"", behavior.string(), "\" is not supported (only \"Isolated\")");
      step.must_be("invert", false, false);
      const std::string& regex = pattern.required("Regex").string();
      try {
        t.splits_.emplace_back(regex);
      } catch (const Error& e) {
        pattern.required("Regex").fail_here("cannot be compiled: ", e.what());
      }
    } else {
      if (!last) step.fail_here("is a ByteLevel before the end; it must be the last pre-tokenizer");
      step.only_keys({"type", "add_prefix_space", "trim_offsets", "use_regex"});
      step.must_be("add_prefix_space", false, true);
      // use_regex: true would apply GPT-2's own split pattern first.
      step.must_be("use_regex", false, true);
      (void)step["trim_offsets"].boolean_or(true);  // offsets only
    }
  }
  if (steps.empty()) pre.fail_here("is an empty sequence; a ByteLevel pre-tokenizer is required");

  // ---- post_processor: ByteLevel only adjusts offsets, adds no ids ----
  Field post = root["post_processor"];
  if (!post.is_null()) {
    post.type({"ByteLevel"});
    post.only_keys({"type", "add_prefix_space", "trim_offsets", "use_regex"});
    for (const char* k : {"add_prefix_space", "trim_offsets", "use_regex"}) (void)post[k].boolean_or(false);
  }

  // ---- decoder: ByteLevel (its options act on offsets, not on bytes) ----
  Field decoder = root.required("decoder");
  if (decoder.is_null()) decoder.fail_here("is null; a ByteLevel decoder is required");
  decoder.type({"ByteLevel"});
  decoder.only_keys({"type", "add_prefix_space", "trim_offsets", "use_regex"});
  for (const char* k : {"add_prefix_space", "trim_offsets", "use_regex"}) (void)decoder[k].boolean_or(false);

  // ---- added tokens ----
  uint64_t vocab_size = t.vocab_.size();
  Field added = root["added_tokens"];
  std::vector<std::pair<std::string, uint32_t>> raw, normalized;
  if (!added.is_null()) {
    for (size_t i = 0; i < added.array_size(); ++i) {
      Field a = added.at(i);
      a.only_keys({"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
      AddedToken tok;
      tok.id = a.required("id").id();
      tok.content = a.required("content").string();
      if (tok.content.empty()) a["content"].fail_here("is empty");
      if (utf8_invalid_offset(tok.content) != kUtf8Valid) a["content"].fail_here("is not valid UTF-8");
      tok.special = a.required("special").boolean();
      tok.normalized = a.required("normalized").boolean();
      // Whitespace stripping and word-boundary matching are not implemented.
      a.must_be("single_word", false, false);
      a.must_be("lstrip", false, false);
      a.must_be("rstrip", false, false);
      tok.bytes = byte_level_decode_token(tok.content);
      if (tok.id < t.vocab_.size()) {
        // An added token may name a vocab token, but only with its own id.
        std::optional<std::string> bytes = byte_level_to_bytes(tok.content);
        auto unreachable = t.unreachable_.find(tok.id);
        const bool same = unreachable != t.unreachable_.end() ? unreachable->second == tok.content
                                                              : bytes && t.vocab_.find(*bytes) == tok.id;
        if (!same)
          a["id"].fail_here("is ", tok.id, ", the id of vocab token ", escaped(bytes_to_byte_level(t.vocab_.bytes(tok.id))),
                            ", not of ", escaped(tok.content));
      } else {
        std::optional<std::string> bytes = byte_level_to_bytes(tok.content);
        if (bytes && t.vocab_.find(*bytes) != kNoRank)
          a["id"].fail_here("is ", tok.id, ", but ", escaped(tok.content), " is vocab token ", t.vocab_.find(*bytes));
      }
      if (t.added_by_id_.count(tok.id)) a["id"].fail_here("is ", tok.id, ", which another added token already has");
      if (t.added_by_content_.count(tok.content))
        a["content"].fail_here(escaped(tok.content), " is already an added token");
      (tok.normalized ? normalized : raw).emplace_back(tok.content, tok.id);
      vocab_size = std::max<uint64_t>(vocab_size, uint64_t{tok.id} + 1);
      t.added_by_id_[tok.id] = t.added_.size();
      t.added_by_content_[tok.content] = t.added_.size();
      t.added_.push_back(std::move(tok));
    }
  }
  t.raw_matcher_ = SpecialMatcher(raw);
  t.normalized_matcher_ = SpecialMatcher(normalized);
  t.has_raw_ = !raw.empty();
  t.has_normalized_ = !normalized.empty();
  t.vocab_size_ = static_cast<size_t>(vocab_size);
  return t;
}

uint32_t HfTokenizer::merge_rank(std::string_view left, std::string_view right) const {
  uint32_t l = vocab_.find(left), r = vocab_.find(right);
  if (l == kNoRank || r == kNoRank) return kNoRank;
  auto it = merges_.find(pair_key(l, r));
  return it == merges_.end() ? kNoRank : it->second;
}

void HfTokenizer::encode_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  if (piece.empty()) return;
  // ignore_merges: a piece that is a token is taken whole, merges or not.
  if (piece.size() == 1 || ignore_merges_) {
    uint32_t whole = vocab_.find(piece);
    if (whole != kNoRank) {
      out.push_back(whole);
      return;
    }
  }
  // Every part is a single byte (all in the vocab, checked at load) or the
  // join of a merge (checked to be in the vocab), so every id is found.
  std::vector<uint32_t> ids = bpe_merge_heap_pairs(
      piece, vocab_, [this](std::string_view l, std::string_view r) { return merge_rank(l, r); });
  out.insert(out.end(), ids.begin(), ids.end());
}

void HfTokenizer::encode_normalized(std::string_view text, std::vector<uint32_t>& out) const {
  if (text.empty()) return;
  // Each Split refines the pieces of the one before; ByteLevel then only
  // relabels bytes, so BPE runs on the raw bytes of each piece.
  std::vector<std::string_view> pieces{text};
  for (const Pretokenizer& split : splits_) {
    std::vector<std::string_view> finer;
    for (std::string_view p : pieces)
      for (std::string_view q : split.split_isolated(p)) finer.push_back(q);
    pieces = std::move(finer);
  }
  for (std::string_view p : pieces) encode_piece(p, out);
}

void HfTokenizer::encode_section(std::string_view text, bool allow_special, std::vector<uint32_t>& out) const {
  if (text.empty()) return;
  std::string normalized = nfc_ ? nfc_normalize(text) : std::string(text);
  std::string_view n = normalized;
  if (!allow_special || !has_normalized_) return encode_normalized(n, out);
  size_t pos = 0;
  SpecialMatcher::Match m;
  while (normalized_matcher_.find(n, pos, &m)) {
    encode_normalized(n.substr(pos, m.start - pos), out);
    out.push_back(m.id);
    pos = m.start + m.length;
  }
  encode_normalized(n.substr(pos), out);
}

std::vector<uint32_t> HfTokenizer::encode(std::string_view text, bool allow_special) const {
  require_valid_utf8(text, "text to encode");
  std::vector<uint32_t> out;
  if (!allow_special || !has_raw_) {
    encode_section(text, allow_special, out);
    return out;
  }
  // Added tokens that are not normalized are cut out of the raw text first
  // (leftmost, then longest), and the text between them is normalised and
  // tokenised on its own, as tokenizers' AddedVocabulary does.
  size_t pos = 0;
  SpecialMatcher::Match m;
  while (raw_matcher_.find(text, pos, &m)) {
    encode_section(text.substr(pos, m.start - pos), allow_special, out);
    out.push_back(m.id);
    pos = m.start + m.length;
  }
  encode_section(text.substr(pos), allow_special, out);
  return out;
}

std::string HfTokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  for (uint32_t id : ids) {
    auto it = added_by_id_.find(id);
    if (it != added_by_id_.end()) {
      out += added_[it->second].bytes;
    } else if (auto u = unreachable_.find(id); u != unreachable_.end()) {
      out += u->second;
    } else if (id < vocab_.size()) {
      out += vocab_.bytes(id);
    } else {
      fail("token id ", id, " is not in the vocabulary (", vocab_.size(), " vocab tokens, ", added_.size(),
           " added tokens, vocab size ", vocab_size_, ")");
    }
  }
  return out;
}

std::optional<uint32_t> HfTokenizer::token_id(std::string_view content) const {
  auto it = added_by_content_.find(std::string(content));
  if (it != added_by_content_.end()) return added_[it->second].id;
  for (const auto& [id, key] : unreachable_)
    if (key == content) return id;
  std::optional<std::string> bytes = byte_level_to_bytes(content);
  if (!bytes) return std::nullopt;
  uint32_t id = vocab_.find(*bytes);
  if (id == kNoRank) return std::nullopt;
  return id;
}

}  // namespace deltafin
