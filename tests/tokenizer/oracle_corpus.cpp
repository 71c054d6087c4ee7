#include "tokenizer/oracle_corpus.h"

#include <string_view>

#include "tokenizer/utf8.h"

namespace deltafin::test {

namespace {

// splitmix64: a self-contained, platform-independent stream.
class Stream {
public:
  explicit Stream(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

private:
  uint64_t state_;
};

// One scalar as UTF-8 (the library's encoder).
std::string utf8(uint32_t cp) {
  std::string out;
  utf8_append(out, cp);
  return out;
}

// A random character from [lo, hi]; every range used is fully assigned
// since Unicode 1.1 or 2.0.
std::string from_range(Stream& r, uint32_t lo, uint32_t hi) { return utf8(lo + static_cast<uint32_t>(r.below(hi - lo + 1))); }

const std::vector<std::string> kWords = {
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "hello", "world", "token", "model", "expert",
    "layer", "is", "a", "an", "of", "and", "to", "in", "it", "that", "was", "for", "on", "are", "with", "they",
    "be", "at", "one", "have", "this", "from", "by", "hot", "word", "but", "what", "some", "can", "out", "other",
    "were", "all", "there", "when", "up", "use", "your", "how", "said", "each", "she", "which", "do", "their",
    "time", "if", "will", "way", "about", "many", "then", "them", "write", "would", "like", "so", "these", "her",
    "long", "make", "thing", "see", "him", "two", "has", "look", "more", "day", "could", "go", "come", "did",
    "number", "sound", "no", "most", "people", "my", "know", "water", "than", "call", "first", "who", "may",
    "down", "side", "been", "now", "find", "tokenization", "internationalization", "x", "ok", "I", "s", "t"};

const std::vector<std::string> kSuffixes = {"'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'Ve",
                                            "'m", "'M", "'ll", "'LL", "'Ll", "'lL", "'d", "'D", "'\xc5\xbf",
                                            "'x", "'", "''", "\xe2\x80\x99s", "'s's", "'sa", "'lll"};

const std::vector<std::string> kPunct = {
    ".", ",", "!", "?", ";", ":", "...", "--", "(", ")", "[", "]", "{", "}", "<", ">", "/", "\\", "\"", "'",
    "#", "@", "$", "%", "^", "&", "*", "_", "=", "+", "|", "~", "`", "->", "=>", "::", "!=", "<=",
    "\xc2\xab", "\xc2\xbb", "\xc2\xbf", "\xc2\xa1", "\xc2\xb7", "\xe2\x80\x94", "\xe2\x80\xa6",  // « » ¿ ¡ · — …
    "\xe3\x80\x82", "\xe3\x80\x81", "\xef\xbc\x8c", "\xe3\x80\x8c", "\xe3\x80\x8d",                // 。 、 ， 「 」
    "\xef\xbc\x81", "\xef\xbc\x9f", "\xef\xbc\x9a", "\xe3\x83\xbb",                                // ！ ？ ： ・
    "\xe2\x88\x91", "\xe2\x88\x9a", "\xe2\x88\x9e", "\xe2\x89\xa0", "\xe2\x86\x92", "\xc2\xb0",    // ∑ √ ∞ ≠ → °
    "\xc2\xa9", "\xe2\x82\xac", "\xc2\xa3", "\xc2\xa5"};                                            // © € £ ¥

// Whitespace and near-whitespace: every White_Space character, CRLF, the
// Python-only spaces U+001C..U+001F, U+180E (White_Space before Unicode 6.3),
// zero-width space, soft hyphen, BOM and a few controls.
const std::vector<std::string> kSpaces = {
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", "\x0b", "\x0c", "\xc2\x85", "\xc2\xa0",
    "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x83", "\xe2\x80\x8a", "\xe2\x80\xa8", "\xe2\x80\xa9",
    "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80", "\x1c", "\x1f", "\xe1\xa0\x8e", "\xe2\x80\x8b", "\xc2\xad",
    "\xef\xbb\xbf", std::string(1, '\0'), "\x01", "\x7f", "\xc2\x80", " \n", "\n ", " \r\n ", "\t\n"};

const std::vector<std::string> kEmoji = {
    "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x82", "\xf0\x9f\x99\x8f", "\xe2\x9c\x93", "\xe2\x98\x85", "\xe2\x9d\xa4\xef\xb8\x8f",
    "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",  // family ZWJ sequence
    "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd",                                            // thumbs up, skin tone
    "\xf0\x9f\x87\xba\xf0\x9f\x87\xb8",                                            // flag US
    "1\xef\xb8\x8f\xe2\x83\xa3",                                                   // keycap 1 (U+20E3 is Me)
    "\xf0\x9f\x8f\xb3\xef\xb8\x8f\xe2\x80\x8d\xf0\x9f\x8c\x88",                    // rainbow flag
    "\xf0\x9f\x92\xa9", "\xf0\x9f\x8e\x89", "\xe2\x98\x95"};

std::string case_variant(Stream& r, const std::string& w) {
  std::string out = w;
  size_t k = r.below(10);
  if (k < 5) return out;
  if (k < 8) {
    if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 32);
    return out;
  }
  if (k < 9) {
    for (char& c : out)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    return out;
  }
  for (char& c : out)
    if (c >= 'a' && c <= 'z' && r.chance(50)) c = static_cast<char>(c - 32);
  return out;
}

std::string han(Stream& r, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += from_range(r, 0x4e00, 0x9fa5);
  return s;
}

std::string kana(Stream& r, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    size_t k = r.below(10);
    if (k < 5) s += from_range(r, 0x3041, 0x3093);       // hiragana
    else if (k < 9) s += from_range(r, 0x30a1, 0x30f3);  // katakana
    else s += "\xe3\x83\xbc";                            // ー (Lm, Script=Common)
  }
  return s;
}

std::string hangul(Stream& r, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += r.chance(95) ? from_range(r, 0xac00, 0xd7a3) : from_range(r, 0x1100, 0x1112);
  return s;
}

std::string digits(Stream& r, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>('0' + r.below(10));
  return s;
}

// A word in some non-Latin script or with marks.
std::string script_word(Stream& r) {
  size_t n = 1 + r.below(8);
  std::string s;
  switch (r.below(11)) {
    case 0:  // Cyrillic, mixed case
      for (size_t i = 0; i < n; ++i)
        s += (i == 0 && r.chance(40)) ? from_range(r, 0x410, 0x42f) : from_range(r, 0x430, 0x44f);
      return s;
    case 1:  // Greek lower, sometimes capitalised (U+0391..U+03A1, skipping unassigned U+03A2)
      if (r.chance(40)) s += from_range(r, 0x391, 0x3a1);
      for (size_t i = 0; i < n; ++i) s += from_range(r, 0x3b1, 0x3c9);
      return s;
    case 2:  // Arabic letters
      for (size_t i = 0; i < n; ++i) s += r.chance(50) ? from_range(r, 0x621, 0x63a) : from_range(r, 0x641, 0x64a);
      return s;
    case 3:  // Hebrew
      for (size_t i = 0; i < n; ++i) s += from_range(r, 0x5d0, 0x5ea);
      return s;
    case 4:  // Devanagari consonants with vowel signs (Mc) and virama (Mn)
      for (size_t i = 0; i < n; ++i) {
        s += from_range(r, 0x915, 0x939);
        if (r.chance(40)) s += r.chance(50) ? utf8(0x93f) : utf8(0x94d);
      }
      return s;
    case 5:  // Thai (Lo with Mn)
      for (size_t i = 0; i < n; ++i) {
        s += from_range(r, 0xe01, 0xe2e);
        if (r.chance(30)) s += utf8(0xe34 + static_cast<uint32_t>(r.below(4)));
      }
      return s;
    case 6: {  // Latin with precomposed accents, titlecase and modifier letters
      const std::vector<std::string> letters = {"\xc3\xa9", "\xc3\xa8", "\xc3\xbc", "\xc3\x9f", "\xc3\xb1", "\xc3\xa7",
                                                "\xc3\x98", "\xc3\x85", "\xc5\x92", "\xc4\xb0", "\xc4\xb1", "\xc7\x85",
                                                "\xc7\x88", "\xca\xb0", "\xc2\xaa", "\xc2\xba", "a", "e", "o", "S"};
      for (size_t i = 0; i < n; ++i) s += r.pick(letters);
      return s;
    }
    case 7:  // base letters with combining marks (U+0300..U+036F)
      for (size_t i = 0; i < n; ++i) {
        s += static_cast<char>((r.chance(70) ? 'a' : 'A') + r.below(26));
        for (size_t k = r.below(3); k > 0; --k) s += from_range(r, 0x300, 0x36f);
      }
      return s;
    case 8:  // fullwidth Latin
      for (size_t i = 0; i < n; ++i) s += r.chance(50) ? from_range(r, 0xff21, 0xff3a) : from_range(r, 0xff41, 0xff5a);
      return s;
    case 9:  // Armenian / Georgian
      for (size_t i = 0; i < n; ++i) s += r.chance(50) ? from_range(r, 0x561, 0x586) : from_range(r, 0x10d0, 0x10f0);
      return s;
    default:  // a mark with no base, marks after digits
      return utf8(0x301) + digits(r, 1) + utf8(0x308) + utf8(0x20e3);
  }
}

std::string other_digits(Stream& r) {
  switch (r.below(6)) {
    case 0: return from_range(r, 0x660, 0x669) + from_range(r, 0x660, 0x669);  // Arabic-Indic
    case 1: return from_range(r, 0xff10, 0xff19) + from_range(r, 0xff10, 0xff19);  // fullwidth
    case 2: return from_range(r, 0x966, 0x96f);                                    // Devanagari
    case 3: return r.chance(50) ? utf8(0xb2) : utf8(0xbd);                         // ² ½ (No)
    case 4: return from_range(r, 0x2160, 0x216b);                                  // Roman numerals (Nl)
    default: return utf8(0x3007) + utf8(0x3007);                                   // 〇 (Nl, Han)
  }
}

std::string prose(Stream& r) {
  std::string s;
  size_t n = 3 + r.below(22);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) {
      size_t k = r.below(20);
      s += k < 14 ? " " : k < 15 ? "  " : k < 16 ? ", " : k < 17 ? ". " : k < 18 ? "\n" : k < 19 ? "\t" : " - ";
    }
    s += case_variant(r, r.pick(kWords));
    if (r.chance(12)) s += r.pick(kSuffixes);
    if (r.chance(5)) {
      s += ' ';
      s += digits(r, 1 + r.below(6));
    }
  }
  s += r.pick(std::vector<std::string>{".", "!", "?", "", "...", ".\n", "\n\n", " "});
  return s;
}

std::string code(Stream& r) {
  std::string nl = r.chance(25) ? "\r\n" : "\n";
  std::string s;
  size_t lines = 1 + r.below(8);
  auto id = [&] {
    std::string w = r.pick(kWords);
    if (r.chance(30)) w += "_" + r.pick(kWords);
    if (r.chance(20)) w += case_variant(r, r.pick(kWords));
    return w;
  };
  for (size_t l = 0; l < lines; ++l) {
    std::string indent = r.chance(30) ? "\t" : "    ";
    for (size_t k = r.below(4); k > 0; --k) s += indent;
    switch (r.below(9)) {
      case 0: s += id() + " = " + id() + "(" + id() + ", " + digits(r, 1 + r.below(5)) + ");"; break;
      case 1: s += "if (" + id() + " < " + digits(r, 1 + r.below(3)) + ") { return " + id() + "; }"; break;
      case 2:
        s += "// ";
        s += prose(r);
        break;
      case 3: s += "#include <" + id() + ".h>"; break;
      case 4: s += "def " + id() + "(" + id() + ", *args, **kw):"; break;
      case 5:
        s += '"';
        s += prose(r);
        s += "\\n\"";
        break;
      case 6: s += "for i in range(" + digits(r, 1 + r.below(4)) + "):"; break;
      case 7: s += "x->y[" + digits(r, 1 + r.below(2)) + "] += 0x" + digits(r, 4) + "ULL; /* " + id() + " */"; break;
      default: s += "}"; break;
    }
    if (r.chance(15)) s += r.chance(50) ? " " : "\t";
    if (l + 1 < lines || r.chance(50)) s += nl;
  }
  return s;
}

std::string whitespace_mix(Stream& r) {
  std::string s;
  size_t n = 1 + r.below(10);
  for (size_t i = 0; i < n; ++i) {
    size_t k = r.below(10);
    if (k < 5) {
      for (size_t j = 1 + r.below(5); j > 0; --j) s += r.pick(kSpaces);
    } else if (k < 8) {
      s += case_variant(r, r.pick(kWords));
    } else if (k < 9) {
      s += r.pick(kPunct);
    } else {
      s += digits(r, 1 + r.below(5));
    }
  }
  return s;
}

std::string cjk(Stream& r) {
  std::string s;
  size_t n = 1 + r.below(8);
  for (size_t i = 0; i < n; ++i) {
    switch (r.below(10)) {
      case 0: case 1: case 2: s += han(r, 1 + r.below(10)); break;
      case 3: case 4: s += kana(r, 1 + r.below(8)); break;
      case 5: s += r.pick(kPunct); break;
      case 6: s += case_variant(r, r.pick(kWords)); break;
      case 7: s += r.chance(50) ? digits(r, 1 + r.below(6)) : other_digits(r); break;
      case 8: s += r.chance(50) ? "\xe3\x80\x80" : " "; break;
      default: s += r.chance(50) ? "\xe3\x80\x85" : "\xe3\x80\x87"; break;  // 々 〇
    }
  }
  return s;
}

std::string korean(Stream& r) {
  std::string s;
  size_t n = 1 + r.below(8);
  for (size_t i = 0; i < n; ++i) {
    if (i) s += r.chance(85) ? " " : r.pick(kSpaces);
    size_t k = r.below(10);
    s += k < 7 ? hangul(r, 1 + r.below(4)) : k < 8 ? digits(r, 1 + r.below(4)) : k < 9 ? r.pick(kWords) : r.pick(kPunct);
  }
  return s;
}

std::string emoji(Stream& r) {
  std::string s;
  size_t n = 1 + r.below(7);
  for (size_t i = 0; i < n; ++i) {
    size_t k = r.below(10);
    s += k < 5 ? r.pick(kEmoji) : k < 8 ? " " + r.pick(kWords) : k < 9 ? r.pick(kSpaces) : r.pick(kPunct);
  }
  return s;
}

std::string scripts(Stream& r) {
  std::string s;
  size_t n = 1 + r.below(7);
  for (size_t i = 0; i < n; ++i) {
    if (i) s += r.chance(80) ? " " : r.pick(kPunct);
    s += script_word(r);
    if (r.chance(10)) s += r.pick(kSuffixes);
  }
  return s;
}

std::string numbers(Stream& r) {
  std::string s;
  size_t n = 1 + r.below(6);
  for (size_t i = 0; i < n; ++i) {
    size_t k = r.below(10);
    if (k < 5) s += digits(r, 1 + r.below(40));
    else if (k < 6) s += other_digits(r);
    else if (k < 8) s += r.pick(std::vector<std::string>{".", ",", "-", " ", ":", "/", "e", "x", "v", "%", "$"});
    else s += case_variant(r, r.pick(kWords));
  }
  return s;
}

std::string contractions(Stream& r) {
  std::string s;
  size_t n = 1 + r.below(5);
  for (size_t i = 0; i < n; ++i) {
    size_t k = r.below(8);
    if (k < 4) s += case_variant(r, r.pick(kWords)) + r.pick(kSuffixes);
    else if (k < 5) s += r.pick(kSuffixes);
    else if (k < 6) s += " " + r.pick(kSuffixes);
    else if (k < 7) s += han(r, 1) + r.pick(kSuffixes);
    else s += digits(r, 1 + r.below(3)) + r.pick(kSuffixes);
    if (r.chance(50)) s += " ";
  }
  return s;
}

// Short strings that sit on the boundaries between the pattern's
// alternatives; every ordered pair of them goes into the corpus.
std::vector<std::string> boundary_atoms() {
  return {" ",        "  ",       "\t",       "\n",       "\r\n",     "\r",       "\xc2\xa0", "\xe3\x80\x80",
          "\xc2\x85", "\xe2\x80\xa8", "\x1c", "\xe1\xa0\x8e", "\xe2\x80\x8b", "a", "A", "ab", "AB", "Ab", "aB",
          "\xc3\xa9", "\xc7\x85", "\xca\xb0", "\xe3\x80\x85", "\xe4\xb8\x96", "\xe3\x83\xbc", "\xe3\x81\x82",
          "\xed\x95\x9c", "\xd0\x96", "\xd0\xb6", "\xce\xa9", "\xcf\x89", "\xd8\xb9", "1", "12", "123", "1234",
          "\xd9\xa3", "\xc2\xbd", "\xe2\x85\xab", "'s", "'S", "'ll", "'", "\xe2\x80\x99", ".", "!!", "(", "\xe3\x80\x82",
          "\xf0\x9f\x98\x80", "\xcc\x81", "\xe2\x83\xa3", "_", "\xc2\xad"};
}

std::vector<std::string> long_strings(Stream& r) {
  std::vector<std::string> out;
  out.push_back(std::string(20000, 'a'));
  out.push_back(std::string(19999, ' ') + "x");
  out.push_back(digits(r, 20000));
  std::string abc;
  for (int i = 0; i < 5000; ++i) abc += "ab ";
  out.push_back(abc);
  out.push_back(han(r, 6000));
  std::string hello;
  for (int i = 0; i < 1200; ++i) hello += "Hello world! ";
  out.push_back(hello);
  out.push_back(std::string(12000, '\n') + "end");
  out.push_back(std::string(15000, 'A'));
  std::string mixed;
  for (int i = 0; i < 20000; ++i) {
    char c = static_cast<char>('a' + r.below(26));
    mixed += r.chance(20) ? static_cast<char>(c - 32) : c;
  }
  out.push_back(mixed);
  out.push_back(std::string(10000, '\t') + "word");
  std::string nbsp;
  for (int i = 0; i < 8000; ++i) nbsp += "\xc2\xa0";
  out.push_back(nbsp + "z");
  return out;
}

}  // namespace

std::vector<std::string> oracle_corpus(uint64_t seed, size_t min_strings) {
  Stream r(seed);
  std::vector<std::string> corpus;
  std::vector<std::string> atoms = boundary_atoms();
  for (const std::string& a : atoms)
    for (const std::string& b : atoms) corpus.push_back(a + b);
  for (int i = 0; i < 2000; ++i) corpus.push_back(r.pick(atoms) + r.pick(atoms) + r.pick(atoms));
  for (std::string& s : long_strings(r)) corpus.push_back(std::move(s));

  std::vector<std::string> all_atoms = atoms;
  for (const auto* pool : {&kSuffixes, &kPunct, &kSpaces, &kEmoji})
    all_atoms.insert(all_atoms.end(), pool->begin(), pool->end());

  while (corpus.size() < min_strings) {
    switch (r.below(12)) {
      case 0: case 1: corpus.push_back(prose(r)); break;
      case 2: corpus.push_back(code(r)); break;
      case 3: corpus.push_back(whitespace_mix(r)); break;
      case 4: corpus.push_back(cjk(r)); break;
      case 5: corpus.push_back(korean(r)); break;
      case 6: corpus.push_back(emoji(r)); break;
      case 7: corpus.push_back(scripts(r)); break;
      case 8: corpus.push_back(numbers(r)); break;
      case 9: corpus.push_back(contractions(r)); break;
      default: {  // soup
        std::string s;
        for (size_t k = 1 + r.below(12); k > 0; --k) s += r.pick(all_atoms);
        corpus.push_back(s);
        break;
      }
    }
  }
  return corpus;
}

std::vector<std::string> oracle_special_texts() {
  return {"<|endoftext|>",
          "a<|endoftext|>b",
          "Hello <|endoftext|> world",
          "<|fim_prefix|>x = 1<|fim_middle|>y<|fim_suffix|>",
          "<|endofprompt|> hi",
          "<|endoftext|><|endoftext|>",
          "<|endoftext",
          "x <|endoftext|>\n\n<|endofprompt|>",
          "\xe6\x97\xa5\xe6\x9c\xac<|endoftext|>\xe8\xaa\x9e",
          "<<|endoftext|>>",
          "  <|endoftext|>  "};
}

}  // namespace deltafin::test
