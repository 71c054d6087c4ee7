#include "tokenizer/python_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace deltafin {
namespace {

using Json = nlohmann::ordered_json;

struct CodePoint {
  char32_t value;
  size_t length;
};

// Invalid UTF-8 decodes byte by byte as U+FFFD, which is not whitespace, so a
// stray byte can never be trimmed away.
CodePoint decode_utf8(std::string_view s, size_t i) {
  const unsigned char b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1};
  size_t length;
  char32_t value;
  char32_t smallest;  // below this the encoding is overlong, hence invalid
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, value = b0 & 0x1F, smallest = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, value = b0 & 0x0F, smallest = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, value = b0 & 0x07, smallest = 0x10000;
  } else {
    return {0xFFFD, 1};
  }
  if (i + length > s.size()) return {0xFFFD, 1};
  for (size_t k = 1; k < length; ++k) {
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return {0xFFFD, 1};
    value = (value << 6) | (b & 0x3F);
  }
  if (value < smallest) return {0xFFFD, 1};
  return {value, length};
}

// Python's encoder with ensure_ascii=False escapes only '"', '\\' and C0
// controls (short forms where JSON has them, else \u00xx in lowercase); '/'
// and DEL stay as they are.
void dump_string(std::string_view s, std::string& out) {
  out += '"';
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// Written out rather than nlohmann's dump() because dump() has no ", "
// separators, formats floats differently (1e16 vs Python's 1e+16, 1e15 vs
// 1000000000000000.0) and throws on invalid UTF-8.
void dump_json(const Json& v, const PythonJsonStyle& style, std::string& out) {
  switch (v.type()) {
    case Json::value_t::null: out += "null"; return;
    case Json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); return;
    case Json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); return;
    case Json::value_t::number_float: {
      const double d = v.get<double>();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += python_float_repr(d);
      return;
    }
    case Json::value_t::string: dump_string(v.get_ref<const std::string&>(), out); return;
    case Json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += style.item_separator;
        dump_json(v[i], style, out);
      }
      out += ']';
      return;
    }
    case Json::value_t::object: {
      std::vector<std::pair<const std::string*, const Json*>> items;
      for (auto it = v.begin(); it != v.end(); ++it) items.emplace_back(&it.key(), &it.value());
      // Byte order of UTF-8 equals code point order, which is Python's str order.
      if (style.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return *a.first < *b.first; });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += style.item_separator;
        dump_string(*items[i].first, out);
        out += style.key_separator;
        dump_json(*items[i].second, style, out);
      }
      out += '}';
      return;
    }
    default:
      fail("cannot serialise a JSON ", v.type_name(), " value");
  }
}

}  // namespace

std::string_view python_strip(std::string_view s) {
  size_t begin = s.size();
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    const CodePoint c = decode_utf8(s, i);
    if (!is_python_space(c.value)) {
      if (begin == s.size()) begin = i;
      end = i + c.length;
    }
    i += c.length;
  }
  return begin == s.size() ? std::string_view{} : s.substr(begin, end - begin);
}

bool python_is_blank(std::string_view s) { return python_strip(s).empty(); }

bool python_truthy(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return v.get<bool>();
    case Json::value_t::number_integer: return v.get<int64_t>() != 0;
    case Json::value_t::number_unsigned: return v.get<uint64_t>() != 0;
    case Json::value_t::number_float: return v.get<double>() != 0.0;  // NaN is truthy too
    case Json::value_t::string: return !v.get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object: return !v.empty();
    default: return true;
  }
}

// The shortest digits that round-trip (std::to_chars gives the same digits as
// Python), fixed notation while the decimal point position p satisfies
// -4 < p <= 16, else d.ddde±XX; integral values in fixed notation keep ".0".
std::string python_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string_view s(buf, static_cast<size_t>(result.ptr - buf));  // e.g. "-1.25e+17"
  std::string out;
  if (s.front() == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::atoi(std::string(s.substr(e + 1)).c_str());
  const int point = exponent + 1;  // digits before the decimal point
  const int n = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-point), '0');
      out += digits;
    } else if (point >= n) {
      out += digits;
      out.append(static_cast<size_t>(point - n), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<size_t>(point));
      out += '.';
      out.append(digits, static_cast<size_t>(point));
    }
  } else {
    out += digits[0];
    if (n > 1) {
      out += '.';
      out.append(digits, 1);
    }
    out += exponent < 0 ? "e-" : "e+";
    const std::string magnitude = std::to_string(std::abs(exponent));
    if (magnitude.size() < 2) out += '0';
    out += magnitude;
  }
  return out;
}

std::string python_str(const Json& v, std::string_view field) {
  switch (v.type()) {
    case Json::value_t::string: return v.get<std::string>();
    case Json::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case Json::value_t::null: return "None";
    case Json::value_t::number_integer: return std::to_string(v.get<int64_t>());
    case Json::value_t::number_unsigned: return std::to_string(v.get<uint64_t>());
    case Json::value_t::number_float: return python_float_repr(v.get<double>());
    default:
      fail(field, ": expected string, number, boolean or null, got ", v.type_name());
  }
}

std::string python_json_dumps(const Json& v, const PythonJsonStyle& style) {
  std::string out;
  dump_json(v, style, out);
  return out;
}

}  // namespace deltafin
