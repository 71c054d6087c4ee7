// UTF-8 helpers for the tokenizer: strict validation (input text must be valid
// UTF-8), decoding of scalars, and the lossy decode used for token bytes, which
// replaces each maximal invalid subpart with U+FFFD (the WHATWG / Unicode
// "substitution of maximal subparts" convention, which is also what Python's
// bytes.decode("utf-8", "replace") does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deltafin {

inline constexpr size_t kUtf8Valid = static_cast<size_t>(-1);

// Byte offset of the first byte that does not start (or continue) a valid
// UTF-8 sequence, or kUtf8Valid. Rejects overlong forms, surrogates and code
// points above U+10FFFF.
size_t utf8_invalid_offset(std::string_view text);

// Throws deltafin::Error "<what> is not valid UTF-8: ... at byte offset N"
// unless `text` is valid.
void require_valid_utf8(std::string_view text, std::string_view what);

// Decodes the scalar starting at text[*pos] of text already known to be valid
// and advances *pos past it.
uint32_t utf8_next(std::string_view text, size_t* pos);

// Appends the UTF-8 encoding of scalar `cp`.
void utf8_append(std::string& out, uint32_t cp);

// `bytes` as text: valid sequences copied, each maximal invalid subpart (a
// valid-so-far prefix of a sequence, or a single bad byte) replaced by U+FFFD.
std::string utf8_replace_invalid(std::string_view bytes);

// Length (0..3) of the trailing bytes that begin a valid sequence the input
// ends before completing: what a streaming decoder must hold back.
size_t utf8_incomplete_tail(std::string_view bytes);

// Python's str.isspace() for one scalar: Unicode White_Space plus the
// information separators U+001C..U+001F. The class used by the long-input
// guard (k3-model.md §8.2).
bool is_python_space(uint32_t cp);

}  // namespace deltafin
