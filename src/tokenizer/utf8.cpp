#include "tokenizer/utf8.h"

#include "util/error.h"

namespace deltafin {

namespace {

// One step of the WHATWG UTF-8 decoder starting at text[i].
struct Sequence {
  size_t length;  // bytes consumed: a whole valid sequence or a maximal invalid subpart
  bool valid;     // a complete, well-formed sequence
  bool cut_by_end;  // invalid only because the input ended inside a valid-so-far sequence
};

Sequence scan_sequence(std::string_view text, size_t i) {
  unsigned char b = static_cast<unsigned char>(text[i]);
  if (b < 0x80) return {1, true, false};
  size_t need;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the first continuation byte
  if (b >= 0xc2 && b <= 0xdf) {
    need = 1;
  } else if (b >= 0xe0 && b <= 0xef) {
    need = 2;
    if (b == 0xe0) lo = 0xa0;  // no overlong 3-byte forms
    if (b == 0xed) hi = 0x9f;  // no surrogates
  } else if (b >= 0xf0 && b <= 0xf4) {
    need = 3;
    if (b == 0xf0) lo = 0x90;  // no overlong 4-byte forms
    if (b == 0xf4) hi = 0x8f;  // nothing above U+10FFFF
  } else {
    return {1, false, false};  // continuation byte, C0/C1 or F5..FF: never a lead byte
  }
  size_t j = i + 1;
  for (size_t k = 0; k < need; ++k) {
    if (j >= text.size()) return {j - i, false, true};
    unsigned char c = static_cast<unsigned char>(text[j]);
    if (c < lo || c > hi) return {j - i, false, false};
    ++j;
    lo = 0x80;
    hi = 0xbf;
  }
  return {j - i, true, false};
}

std::string show_byte(unsigned char c) {
  static const char hex[] = "0123456789abcdef";
  return cat("0x", hex[c >> 4], hex[c & 15]);
}

}  // namespace

size_t utf8_invalid_offset(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII fast path: most text is mostly ASCII.
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    Sequence s = scan_sequence(text, i);
    if (!s.valid) return i;
    i += s.length;
  }
  return kUtf8Valid;
}

void require_valid_utf8(std::string_view text, std::string_view what) {
  size_t bad = utf8_invalid_offset(text);
  if (bad == kUtf8Valid) return;
  Sequence s = scan_sequence(text, bad);
  if (s.cut_by_end)
    fail(what, " is not valid UTF-8: it ends inside a multi-byte sequence that starts at byte offset ", bad);
  fail(what, " is not valid UTF-8: invalid sequence starting with byte ", show_byte(static_cast<unsigned char>(text[bad])),
       " at byte offset ", bad);
}

uint32_t utf8_next(std::string_view text, size_t* pos) {
  size_t i = *pos;
  unsigned char b = static_cast<unsigned char>(text[i]);
  auto cont = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(text[i + k]) & 0x3f); };
  if (b < 0x80) {
    *pos = i + 1;
    return b;
  }
  if (b < 0xe0) {
    *pos = i + 2;
    return (static_cast<uint32_t>(b & 0x1f) << 6) | cont(1);
  }
  if (b < 0xf0) {
    *pos = i + 3;
    return (static_cast<uint32_t>(b & 0x0f) << 12) | (cont(1) << 6) | cont(2);
  }
  *pos = i + 4;
  return (static_cast<uint32_t>(b & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string utf8_replace_invalid(std::string_view bytes) {
  static constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    Sequence s = scan_sequence(bytes, i);
    if (s.valid)
      out.append(bytes.substr(i, s.length));
    else
      out.append(kReplacement);
    i += s.length;
  }
  return out;
}

size_t utf8_incomplete_tail(std::string_view bytes) {
  // A sequence is at most 4 bytes, so only a lead byte among the last 3 can
  // start an unfinished one.
  size_t start = bytes.size() >= 3 ? bytes.size() - 3 : 0;
  for (size_t i = start; i < bytes.size(); ++i) {
    Sequence s = scan_sequence(bytes, i);
    if (s.cut_by_end) return bytes.size() - i;
  }
  return 0;
}

bool is_python_space(uint32_t cp) {
  if (cp >= 0x09 && cp <= 0x0d) return true;
  if (cp >= 0x1c && cp <= 0x20) return true;
  if (cp < 0x85) return false;
  switch (cp) {
    case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029: case 0x202f: case 0x205f: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200a;
  }
}

}  // namespace deltafin
