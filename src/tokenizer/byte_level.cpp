#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace deltafin {

namespace {

// GPT-2's bytes_to_unicode(), built once: printable bytes keep their code
// point, the rest get 256, 257, ... in byte order.
struct Tables {
  std::array<uint32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // every mapped character is below U+0200
  Tables() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? b : next++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_level_char(uint8_t byte) { return tables().to_char[byte]; }

std::optional<uint8_t> byte_level_byte(uint32_t cp) {
  if (cp >= tables().to_byte.size() || tables().to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().to_byte[cp]);
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  if (utf8_invalid_offset(text) != kUtf8Valid) return std::nullopt;
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    std::optional<uint8_t> b = byte_level_byte(utf8_next(text, &pos));
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8_append(out, byte_level_char(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace deltafin
