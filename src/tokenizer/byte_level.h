// The GPT-2 "byte-level" alphabet that Hugging Face ByteLevel pre-tokenizers
// and decoders use: every byte is shown as one printable Unicode character,
// so byte-level BPE vocabularies can be stored as JSON strings. Printable
// Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for
// themselves; the other 68 bytes (controls, space, U+00AD, ...) map in order
// to U+0100, U+0101, ... ("Ġ" U+0120 is the space byte).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deltafin {

// The character that stands for `byte`.
uint32_t byte_level_char(uint8_t byte);

// The byte a character stands for, or nullopt for a character outside the
// 256 of the alphabet.
std::optional<uint8_t> byte_level_byte(uint32_t cp);

// Raw bytes of a byte-level string (valid UTF-8 whose every character is in
// the alphabet); nullopt otherwise.
std::optional<std::string> byte_level_to_bytes(std::string_view text);

// The byte-level spelling (UTF-8) of raw bytes.
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace deltafin
