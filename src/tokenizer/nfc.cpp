#include "tokenizer/nfc.h"

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <vector>

#include "util/error.h"

namespace deltafin {

namespace {

const UNormalizer2* nfc_instance() {
  static const UNormalizer2* instance = [] {
    UErrorCode status = U_ZERO_ERROR;
    const UNormalizer2* n = unorm2_getNFCInstance(&status);
    if (U_FAILURE(status) || !n) fail("ICU: cannot load the NFC normaliser: ", u_errorName(status));
    return n;
  }();
  return instance;
}

void check(UErrorCode status, const char* what) {
  if (U_FAILURE(status)) fail("ICU NFC normalisation: ", what, " failed: ", u_errorName(status));
}

}  // namespace

std::string nfc_normalize(std::string_view text) {
  // ASCII is NFC and is most input: skip ICU's UTF-16 round trip.
  bool ascii = true;
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  if (ascii) return std::string(text);

  const UNormalizer2* nfc = nfc_instance();
  // ICU normalises UTF-16: convert, check, normalise, convert back.
  UErrorCode status = U_ZERO_ERROR;
  int32_t len16 = 0;
  u_strFromUTF8(nullptr, 0, &len16, text.data(), static_cast<int32_t>(text.size()), &status);
  if (status == U_BUFFER_OVERFLOW_ERROR) status = U_ZERO_ERROR;
  check(status, "UTF-8 to UTF-16 (size)");
  std::vector<UChar> src(static_cast<size_t>(len16) + 1);
  u_strFromUTF8(src.data(), len16 + 1, &len16, text.data(), static_cast<int32_t>(text.size()), &status);
  check(status, "UTF-8 to UTF-16");

  if (unorm2_isNormalized(nfc, src.data(), len16, &status)) {
    check(status, "the NFC check");
    return std::string(text);
  }
  check(status, "the NFC check");

  int32_t out_len = unorm2_normalize(nfc, src.data(), len16, nullptr, 0, &status);
  if (status == U_BUFFER_OVERFLOW_ERROR) status = U_ZERO_ERROR;
  check(status, "normalize (size)");
  std::vector<UChar> normalized(static_cast<size_t>(out_len) + 1);
  out_len = unorm2_normalize(nfc, src.data(), len16, normalized.data(), out_len + 1, &status);
  check(status, "normalize");

  int32_t len8 = 0;
  u_strToUTF8(nullptr, 0, &len8, normalized.data(), out_len, &status);
  if (status == U_BUFFER_OVERFLOW_ERROR) status = U_ZERO_ERROR;
  check(status, "UTF-16 to UTF-8 (size)");
  std::string out(static_cast<size_t>(len8) + 1, '\0');
  u_strToUTF8(out.data(), len8 + 1, &len8, normalized.data(), out_len, &status);
  check(status, "UTF-16 to UTF-8");
  out.resize(static_cast<size_t>(len8));
  return out;
}

}  // namespace deltafin
