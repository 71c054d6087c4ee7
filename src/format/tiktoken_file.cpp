#include "format/tiktoken_file.h"

#include <array>
#include <cstdint>
#include <unordered_map>

#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Value of a base64 digit, or -1 for a byte outside the alphabet.
int base64_digit(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Printable form of a byte for messages: the character itself when it is
// printable ASCII, otherwise 0xNN.
std::string show_byte(unsigned char c) {
  if (c >= 0x21 && c <= 0x7e) return cat("'", static_cast<char>(c), "'");
  static const char hex[] = "0123456789abcdef";
  return cat("0x", hex[c >> 4], hex[c & 15]);
}

// Decodes canonical padded base64; returns an empty string and sets *why when
// the text is not. Canonical means: length a multiple of 4, at most two '='
// and only at the end, and zero bits in the unused low bits of the last digit
// (the form every encoder writes), so each token has exactly one spelling.
std::string decode_base64(std::string_view text, std::string* why) {
  if (text.empty()) {
    *why = "empty base64 field";
    return {};
  }
  if (text.size() % 4 != 0) {
    *why = cat("base64 field has ", text.size(), " characters, not a multiple of 4");
    return {};
  }
  size_t pad = 0;
  if (text.back() == '=') pad = (text.size() >= 2 && text[text.size() - 2] == '=') ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  for (size_t i = 0; i < text.size() - pad; ++i) {
    int d = base64_digit(static_cast<unsigned char>(text[i]));
    if (d < 0) {
      *why = cat("invalid base64 character ", show_byte(static_cast<unsigned char>(text[i])), " at column ",
                 i + 1);
      return {};
    }
    acc = (acc << 6) | static_cast<uint32_t>(d);
    if (i % 4 == 3) {
      out.push_back(static_cast<char>((acc >> 16) & 0xff));
      out.push_back(static_cast<char>((acc >> 8) & 0xff));
      out.push_back(static_cast<char>(acc & 0xff));
      acc = 0;
    }
  }
  if (pad == 2) {  // 2 digits = 12 bits -> 1 byte + 4 unused bits
    if ((acc & 0xf) != 0) {
      *why = "non-canonical base64: unused bits before '==' are not zero";
      return {};
    }
    out.push_back(static_cast<char>((acc >> 4) & 0xff));
  } else if (pad == 1) {  // 3 digits = 18 bits -> 2 bytes + 2 unused bits
    if ((acc & 0x3) != 0) {
      *why = "non-canonical base64: unused bits before '=' are not zero";
      return {};
    }
    out.push_back(static_cast<char>((acc >> 10) & 0xff));
    out.push_back(static_cast<char>((acc >> 2) & 0xff));
  }
  return out;
}

// Parses a decimal rank: digits only, no sign, no leading zeros (except "0"),
// fits in 32 bits. Returns false if the text is not such a number.
bool parse_rank(std::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 10) return false;
  if (text.size() > 1 && text[0] == '0') return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > 0xffffffffull) return false;
  *value = v;
  return true;
}

// The printable form of a field for error messages, cut short if long.
std::string quote_field(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 40; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? std::string(1, static_cast<char>(c)) : show_byte(c);
  }
  if (s.size() > 40) out += "...";
  return out + "\"";
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (bytes.size() - i == 1) {
    uint32_t v = byte(i) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (bytes.size() - i == 2) {
    uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::vector<std::string> parse_tiktoken_ranks(std::string_view text, const std::string& source) {
  std::vector<std::string> tokens;
  // Token bytes -> 1-based line where they first appeared, to name both lines
  // of a duplicate.
  std::unordered_map<std::string, size_t> seen;
  size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();  // last line without a newline
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    std::string where = cat(source, ":", line_no);

    if (line.empty()) fail(where, ": empty line (expected `base64 rank`)");
    if (line.back() == '\r') fail(where, ": line ends with a carriage return (CRLF line endings are not allowed)");
    size_t space = line.find(' ');
    if (space == std::string_view::npos)
      fail(where, ": expected `base64 rank` separated by one space, found ", quote_field(line));
    std::string_view b64 = line.substr(0, space), rank_text = line.substr(space + 1);
    if (rank_text.find(' ') != std::string_view::npos)
      fail(where, ": expected exactly two fields `base64 rank`, found ", quote_field(line));

    uint64_t rank = 0;
    if (!parse_rank(rank_text, &rank))
      fail(where, ": rank ", quote_field(rank_text), " is not a decimal integer");
    if (rank != tokens.size())
      fail(where, ": rank ", rank, " out of order: ranks must be contiguous from 0 in file order, expected ",
           tokens.size());

    std::string why;
    std::string bytes = decode_base64(b64, &why);
    if (!why.empty()) fail(where, ": token ", quote_field(b64), ": ", why);

    auto [it, inserted] = seen.emplace(bytes, line_no);
    if (!inserted)
      fail(where, ": duplicate token ", quote_field(b64), " (rank ", rank, "), same bytes as line ", it->second);
    tokens.push_back(std::move(bytes));
  }
  if (tokens.empty()) fail(source, ": rank file is empty");
  for (int b = 0; b < 256; ++b)
    if (!seen.count(std::string(1, static_cast<char>(b))))
      fail(source, ": the single byte ", show_byte(static_cast<unsigned char>(b)),
           " has no rank (all 256 single bytes must be present)");
  return tokens;
}

std::vector<std::string> read_tiktoken_file(const std::string& path) {
  return parse_tiktoken_ranks(read_text_file(path), path);
}

void validate_rank_tokens(const std::vector<std::string>& tokens, const std::string& source) {
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(tokens.size());
  for (size_t rank = 0; rank < tokens.size(); ++rank) {
    if (tokens[rank].empty()) fail(source, ": token of rank ", rank, " is empty");
    auto [it, inserted] = seen.emplace(tokens[rank], rank);
    if (!inserted)
      fail(source, ": duplicate token ", quote_field(tokens[rank]), " at ranks ", it->second, " and ", rank);
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    if (!seen.count(std::string_view(&c, 1)))
      fail(source, ": the single byte ", show_byte(static_cast<unsigned char>(b)),
           " has no rank (all 256 single bytes must be present)");
  }
}

std::string format_tiktoken_ranks(const std::vector<std::string>& tokens) {
  validate_rank_tokens(tokens, "rank list to write");
  std::string out;
  for (size_t rank = 0; rank < tokens.size(); ++rank) out += cat(base64_encode(tokens[rank]), ' ', rank, '\n');
  return out;
}

}  // namespace deltafin
