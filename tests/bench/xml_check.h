// A minimal XML walk for the tests of the SVG writers: enough to say that a
// browser will parse the file (one root, tags balanced and nested, attribute
// values quoted, no raw '<' or stray '&'), and to pull out the <text> strings.
#pragma once

#include <cctype>
#include <set>
#include <string>
#include <vector>

namespace deltafin::test {

namespace xml_detail {

inline bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
inline bool name_char(char c) {
  return name_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
}

// An entity at s[i] == '&': one of the five named ones or a character reference.
inline bool entity_ok(const std::string& s, size_t i) {
  const size_t end = s.find(';', i);
  if (end == std::string::npos || end - i > 10) return false;
  const std::string e = s.substr(i + 1, end - i - 1);
  if (e == "amp" || e == "lt" || e == "gt" || e == "quot" || e == "apos") return true;
  if (e.size() > 1 && e[0] == '#') {
    for (size_t k = 1; k < e.size(); ++k)
      if (!std::isxdigit(static_cast<unsigned char>(e[k])) && !(k == 1 && e[k] == 'x')) return false;
    return true;
  }
  return false;
}

// Checks s[from, to) for raw '<' and bad '&'; returns "" or the problem.
inline std::string chars_ok(const std::string& s, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (s[i] == '<') return "raw '<' at byte " + std::to_string(i);
    if (s[i] == '&' && !entity_ok(s, i)) return "bad entity at byte " + std::to_string(i);
  }
  return "";
}

}  // namespace xml_detail

// "" when well-formed, else what is wrong and at which byte.
inline std::string xml_problem(const std::string& s) {
  using namespace xml_detail;
  std::vector<std::string> open;
  size_t i = 0, roots = 0;
  auto at = [&](const std::string& what) { return what + " at byte " + std::to_string(i); };
  auto skip_ws = [&] {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  };
  auto read_name = [&] {
    const size_t b = i;
    if (i < s.size() && name_start(s[i]))
      while (i < s.size() && name_char(s[i])) ++i;
    return s.substr(b, i - b);
  };
  if (s.compare(0, 5, "<?xml") == 0) {
    i = s.find("?>");
    if (i == std::string::npos) return "unclosed XML declaration";
    i += 2;
  }
  while (i < s.size()) {
    if (s[i] != '<') {  // text: only whitespace outside the root
      const size_t end = std::min(s.find('<', i), s.size());
      if (open.empty())
        for (size_t k = i; k < end; ++k)
          if (!std::isspace(static_cast<unsigned char>(s[k]))) return at("text outside the root element");
      if (std::string p = chars_ok(s, i, end); !p.empty()) return p;
      i = end;
      continue;
    }
    if (s.compare(i, 4, "<!--") == 0) {
      const size_t end = s.find("-->", i);
      if (end == std::string::npos) return at("unclosed comment");
      i = end + 3;
      continue;
    }
    if (s.compare(i, 2, "</") == 0) {
      i += 2;
      const std::string name = read_name();
      skip_ws();
      if (i >= s.size() || s[i] != '>') return at("bad closing tag </" + name);
      if (open.empty() || open.back() != name)
        return at("closing </" + name + "> does not match <" + (open.empty() ? std::string("nothing") : open.back()) + ">");
      open.pop_back();
      ++i;
      continue;
    }
    ++i;  // an opening tag
    const std::string name = read_name();
    if (name.empty()) return at("a tag without a name");
    if (open.empty() && ++roots > 1) return at("a second root element");
    std::set<std::string> attrs;
    for (;;) {
      const size_t before = i;
      skip_ws();
      if (i >= s.size()) return "unclosed tag <" + name + ">";
      if (s.compare(i, 2, "/>") == 0) {
        i += 2;
        break;
      }
      if (s[i] == '>') {
        open.push_back(name);
        ++i;
        break;
      }
      if (i == before) return at("no space before an attribute of <" + name + ">");
      const std::string a = read_name();
      if (a.empty()) return at("a bad attribute name in <" + name + ">");
      if (!attrs.insert(a).second) return at("attribute " + a + " twice in <" + name + ">");
      skip_ws();
      if (i >= s.size() || s[i] != '=') return at("attribute " + a + " without '='");
      ++i;
      skip_ws();
      if (i >= s.size() || (s[i] != '"' && s[i] != '\'')) return at("attribute " + a + " not quoted");
      const char q = s[i++];
      const size_t end = s.find(q, i);
      if (end == std::string::npos) return at("unterminated value of " + a);
      if (std::string p = chars_ok(s, i, end); !p.empty()) return p + " (attribute " + a + ")";
      i = end + 1;
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (roots != 1) return "no root element";
  return "";
}

// The contents of every <text> element, entities decoded, in order.
inline std::vector<std::string> svg_texts(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = s.find("<text"); i != std::string::npos; i = s.find("<text", i)) {
    const size_t b = s.find('>', i) + 1, e = s.find("</text>", b);
    std::string raw = s.substr(b, e - b), t;
    for (size_t k = 0; k < raw.size(); ++k) {
      if (raw[k] != '&') {
        t += raw[k];
        continue;
      }
      const size_t semi = raw.find(';', k);
      const std::string ent = raw.substr(k + 1, semi - k - 1);
      t += ent == "amp" ? "&" : ent == "lt" ? "<" : ent == "gt" ? ">" : ent == "quot" ? "\"" : ent == "apos" ? "'" : "?";
      k = semi;
    }
    out.push_back(t);
    i = e;
  }
  return out;
}

inline bool has_text(const std::string& svg, const std::string& text) {
  for (const std::string& t : svg_texts(svg))
    if (t == text) return true;
  return false;
}

}  // namespace deltafin::test
