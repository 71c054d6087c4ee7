// Unicode NFC normalisation (the Hugging Face `NFC` normalizer), by ICU:
// PCRE2 has no normaliser, and composition needs the Unicode tables ICU ships.
#pragma once

#include <string>
#include <string_view>

namespace deltafin {

// NFC of valid UTF-8 text (the caller validates). Text already in NFC (all
// ASCII text, most text) is returned unchanged without conversion.
std::string nfc_normalize(std::string_view text);

}  // namespace deltafin
