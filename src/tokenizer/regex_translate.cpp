#include "tokenizer/regex_translate.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <vector>

#include "util/error.h"

namespace deltafin {

const char* const kWhiteSpaceClassItems =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
const char* const kNonWhiteSpaceClassItems =
    "\\x{0}-\\x{8}\\x{E}-\\x{1F}\\x{21}-\\x{84}\\x{86}-\\x{9F}\\x{A1}-\\x{167F}\\x{1681}-\\x{1FFF}"
    "\\x{200B}-\\x{2027}\\x{202A}-\\x{202E}\\x{2030}-\\x{205E}\\x{2060}-\\x{2FFF}\\x{3001}-\\x{10FFFF}";

namespace {

// Any one character: the body of a negated class that PCRE2 cannot express
// directly is "(?!class)" followed by this.
constexpr const char* kAnyChar = "[\\x{0}-\\x{10FFFF}]";

// True if PCRE2 knows `name` as a script: then Rust's `\p{name}` means
// Script=name, which PCRE2 spells `\p{sc:name}`. General categories and
// binary properties are not scripts and keep their spelling.
bool is_script_name(const std::string& name) {
  std::string probe = "\\p{sc:" + name + "}";
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(probe.data()), probe.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) return false;
  pcre2_code_free(code);
  return true;
}

// One operand of a class: a union of plain items (PCRE2 class text) and
// nested classes. Operands of one class are joined by `&&`.
struct ClassNode;
struct Operand {
  std::string items;
  int item_count = 0;
  bool lone_atom = false;  // items is exactly one escape that is valid outside a class too (\p{..}, \x{..})
  std::vector<ClassNode> nested;
  bool empty() const { return items.empty() && nested.empty(); }
};
struct ClassNode {
  bool negated = false;
  std::vector<Operand> operands;
};

class Translator {
public:
  Translator(std::string_view pattern, bool full) : p_(pattern), full_(full) {}

  std::string run() {
    std::string out;
    while (i_ < p_.size()) {
      char c = p_[i_];
      if (c == '\\') {
        bool atom = false;
        out += escape(false, &atom);
      } else if (c == '[') {
        out += emit(parse_class());
      } else {
        out += c;
        ++i_;
      }
    }
    return out;
  }

private:
  [[noreturn]] void error(size_t at, const std::string& what) const {
    fail("pre-tokenizer pattern \"", p_, "\": at offset ", at, ": ", what);
  }

  // Translates the escape at p_[i_] == '\\' and advances past it. *atom says
  // whether the result is one class item that is also valid outside a class.
  std::string escape(bool in_class, bool* atom) {
    size_t at = i_;
    if (i_ + 1 >= p_.size()) error(at, "pattern ends with a lone backslash");
    char c = p_[i_ + 1];
    i_ += 2;
    *atom = false;
    if (c == 'p' || c == 'P') return property(c, at, atom);
    if (!full_) {
      *atom = true;
      return std::string("\\") + c;
    }
    switch (c) {
      case 's':
        return in_class ? kWhiteSpaceClassItems : cat("[", kWhiteSpaceClassItems, "]");
      case 'S':
        return in_class ? kNonWhiteSpaceClassItems : cat("[^", kWhiteSpaceClassItems, "]");
      case 'd':
        *atom = true;
        return "\\p{Nd}";  // Rust's Unicode \d is exactly Nd
      case 'D':
        *atom = true;
        return "\\P{Nd}";
      case 'v':
        *atom = true;
        return "\\x{B}";  // Rust: vertical tab; PCRE2: any vertical space
      case 'w': case 'W': case 'b': case 'B': case '<': case '>':
        error(at, cat("\\", c, " is not supported: Rust and PCRE2 define word characters differently"));
      case 'u': case 'U':
        return code_point(c, at, atom);
      default:
        // \t \n \r \f \a \x.. \A \z and escaped punctuation mean the same in both.
        *atom = true;
        return std::string("\\") + c;
    }
  }

  // \p{Name}, \pL, \P{...}: general categories and binary properties pass
  // through; script names become sc:Name (see is_script_name).
  std::string property(char which, size_t at, bool* atom) {
    std::string name;
    if (i_ < p_.size() && p_[i_] == '{') {
      size_t close = p_.find('}', i_);
      if (close == std::string_view::npos) error(at, "unterminated \\p{...}");
      name = std::string(p_.substr(i_ + 1, close - i_ - 1));
      i_ = close + 1;
    } else if (i_ < p_.size()) {
      name = std::string(1, p_[i_]);
      ++i_;
    } else {
      error(at, "\\p without a property name");
    }
    if (name.empty()) error(at, "empty property name");
    *atom = true;
    if (full_ && name.find_first_of("=:") == std::string::npos && is_script_name(name)) name = "sc:" + name;
    return cat("\\", which, "{", name, "}");
  }

  // Rust's \u{...}, \uXXXX and \UXXXXXXXX; PCRE2 writes code points as \x{...}.
  std::string code_point(char c, size_t at, bool* atom) {
    std::string hex;
    if (i_ < p_.size() && p_[i_] == '{') {
      size_t close = p_.find('}', i_);
      if (close == std::string_view::npos) error(at, "unterminated \\u{...}");
      hex = std::string(p_.substr(i_ + 1, close - i_ - 1));
      i_ = close + 1;
    } else {
      size_t digits = c == 'u' ? 4 : 8;
      if (i_ + digits > p_.size()) error(at, cat("\\", c, " needs ", digits, " hex digits"));
      hex = std::string(p_.substr(i_, digits));
      i_ += digits;
    }
    if (hex.empty() || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      error(at, cat("bad hex digits in \\", c, " escape"));
    *atom = true;
    return "\\x{" + hex + "}";
  }

  // Parses the class starting at p_[i_] == '['.
  ClassNode parse_class() {
    size_t at = i_;
    ++i_;
    ClassNode node;
    if (i_ < p_.size() && p_[i_] == '^') {
      node.negated = true;
      ++i_;
    }
    node.operands.emplace_back();
    bool first = true;  // Rust: ']' right after '[' or '[^' is a literal
    while (true) {
      if (i_ >= p_.size()) error(at, "unterminated character class");
      Operand& op = node.operands.back();
      char c = p_[i_];
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      std::string_view two = p_.substr(i_, 2);
      if (two == "&&") {
        if (op.empty()) error(i_, "class intersection '&&' with an empty left operand");
        node.operands.emplace_back();
        i_ += 2;
        first = false;
        continue;
      }
      if (two == "--" || two == "~~")
        error(i_, cat("class operator '", two, "' (difference / symmetric difference) is not supported"));
      if (c == '[') {
        if (two == "[:") error(i_, "POSIX classes like [:alpha:] are not supported: write the ranges out");
        op.nested.push_back(parse_class());
      } else if (c == '\\') {
        bool atom = false;
        op.items += escape(true, &atom);
        op.lone_atom = atom && op.item_count == 0;
        ++op.item_count;
      } else {
        // A literal; '^' first or ']' would change the meaning of a PCRE2 class.
        if ((c == '^' && op.items.empty()) || c == ']') op.items += '\\';
        size_t len = 1;  // copy a whole UTF-8 character
        while (i_ + len < p_.size() && (static_cast<unsigned char>(p_[i_ + len]) & 0xc0) == 0x80) ++len;
        op.items += p_.substr(i_, len);
        op.lone_atom = false;
        ++op.item_count;
        i_ += len;
      }
      first = false;
    }
    if (node.operands.back().empty()) error(at, "class intersection '&&' with an empty right operand");
    return node;
  }

  // A single-character matcher for the union an operand describes.
  std::string matcher(const Operand& op) const {
    if (op.nested.empty()) return "[" + op.items + "]";
    std::vector<std::string> parts;
    if (!op.items.empty()) parts.push_back("[" + op.items + "]");
    for (const ClassNode& n : op.nested) parts.push_back(emit(n));
    if (parts.size() == 1) return parts[0];
    std::string out = "(?:";
    for (size_t k = 0; k < parts.size(); ++k) out += (k ? "|" : "") + parts[k];
    return out + ")";
  }

  // A zero-width test that the next character is in the operand's set. A lone
  // negated class [^Y] reads best as (?!Y), which is also what k3-model.md
  // §8.2 writes.
  std::string lookahead(const Operand& op) const {
    if (op.items.empty() && op.nested.size() == 1) {
      const ClassNode& n = op.nested[0];
      if (n.negated && n.operands.size() == 1 && n.operands[0].nested.empty()) {
        const Operand& y = n.operands[0];
        return "(?!" + (y.lone_atom ? y.items : "[" + y.items + "]") + ")";
      }
    }
    return "(?=" + matcher(op) + ")";
  }

  std::string emit(const ClassNode& node) const {
    if (node.operands.size() == 1 && node.operands[0].nested.empty())
      return cat("[", node.negated ? "^" : "", node.operands[0].items, "]");
    std::string body;
    if (node.operands.size() == 1) {
      body = matcher(node.operands[0]);
    } else {
      body = "(?:";
      for (size_t k = 1; k < node.operands.size(); ++k) body += lookahead(node.operands[k]);
      body += matcher(node.operands[0]) + ")";
    }
    if (!node.negated) return body;
    return "(?:(?!" + body + ")" + kAnyChar + ")";
  }

  std::string_view p_;
  bool full_;
  size_t i_ = 0;
};

}  // namespace

std::string translate_class_intersection(std::string_view pattern) { return Translator(pattern, false).run(); }

std::string translate_to_pcre2(std::string_view pattern) { return Translator(pattern, true).run(); }

}  // namespace deltafin
