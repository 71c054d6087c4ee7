// UTF-8 validation, lossy decoding (maximal-subpart replacement, the examples
// of Unicode Table 3-8 and Python's "replace") and the Python isspace class.
#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <string>

#include "util/error.h"

namespace deltafin {
namespace {

const std::string kFffd = "\xef\xbf\xbd";

TEST(Utf8, FindsTheFirstInvalidOffset) {
  EXPECT_EQ(utf8_invalid_offset("plain ascii"), kUtf8Valid);
  EXPECT_EQ(utf8_invalid_offset("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), kUtf8Valid);  // é € 😀
  EXPECT_EQ(utf8_invalid_offset("ab\xff"), 2u);
  EXPECT_EQ(utf8_invalid_offset("a\xc0\x80"), 1u);        // overlong NUL
  EXPECT_EQ(utf8_invalid_offset("ab\xed\xa0\x80"), 2u);   // surrogate U+D800
  EXPECT_EQ(utf8_invalid_offset("\xf4\x90\x80\x80"), 0u); // above U+10FFFF
  EXPECT_EQ(utf8_invalid_offset("xyz\xe2\x82"), 3u);      // truncated at the end
  EXPECT_EQ(utf8_invalid_offset("\x80"), 0u);             // lone continuation byte
}

TEST(Utf8, RequireValidNamesTheOffset) {
  try {
    require_valid_utf8("abc\xfe", "text to encode");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "text to encode is not valid UTF-8: invalid sequence starting with byte 0xfe at byte offset 3");
  }
  try {
    require_valid_utf8("ab\xe2\x82", "text");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ends inside a multi-byte sequence that starts at byte offset 2"),
              std::string::npos);
  }
}

TEST(Utf8, ReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_replace_invalid("h\xc3\xa9llo"), "h\xc3\xa9llo");
  EXPECT_EQ(utf8_replace_invalid("\xe4\xb8"), kFffd);             // one truncated sequence, one U+FFFD
  EXPECT_EQ(utf8_replace_invalid("\xff"), kFffd);
  EXPECT_EQ(utf8_replace_invalid("\xe4" "A"), kFffd + "A");      // the bad byte is not swallowed
  EXPECT_EQ(utf8_replace_invalid("\xf0\x9f\x98" "a"), kFffd + "a");
  EXPECT_EQ(utf8_replace_invalid("\xc0\x80"), kFffd + kFffd);     // C0 is never a lead byte
  EXPECT_EQ(utf8_replace_invalid("\xed\xa0\x80"), kFffd + kFffd + kFffd);
  EXPECT_EQ(utf8_replace_invalid("\xf4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);
  // Unicode Table 3-8: 61 F1 80 80 E1 80 C2 62 -> a, FFFD, FFFD, FFFD, b.
  EXPECT_EQ(utf8_replace_invalid("a\xf1\x80\x80\xe1\x80\xc2" "b"), "a" + kFffd + kFffd + kFffd + "b");
}

TEST(Utf8, IncompleteTailIsTheUnfinishedSequenceOnly) {
  EXPECT_EQ(utf8_incomplete_tail(""), 0u);
  EXPECT_EQ(utf8_incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xc3"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("a\xe2\x82"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("\xf0\x9f\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("\xf0\x9f\x98\x80"), 0u);  // complete
  EXPECT_EQ(utf8_incomplete_tail("a\xff"), 0u);             // invalid, not unfinished
  EXPECT_EQ(utf8_incomplete_tail("a\xe0\x80"), 0u);         // E0 80 can never become valid
  EXPECT_EQ(utf8_incomplete_tail("\xe4\xe4\xb8"), 2u);      // only the second E4 is still open
}

TEST(Utf8, NextAndAppendRoundTrip) {
  std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  size_t pos = 0;
  EXPECT_EQ(utf8_next(text, &pos), 0x61u);
  EXPECT_EQ(utf8_next(text, &pos), 0xe9u);
  EXPECT_EQ(utf8_next(text, &pos), 0x20acu);
  EXPECT_EQ(utf8_next(text, &pos), 0x1f600u);
  EXPECT_EQ(pos, text.size());
  std::string out;
  for (uint32_t cp : {0x61u, 0xe9u, 0x20acu, 0x1f600u}) utf8_append(out, cp);
  EXPECT_EQ(out, text);
}

TEST(Utf8, PythonIsspaceClass) {
  // Python 3: [c for c in range(0x110000) if chr(c).isspace()].
  const uint32_t spaces[] = {0x9,    0xa,    0xb,    0xc,    0xd,    0x1c,   0x1d,   0x1e,   0x1f,   0x20,
                             0x85,   0xa0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
                             0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000};
  size_t count = 0;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) count += is_python_space(cp);
  EXPECT_EQ(count, std::size(spaces));
  for (uint32_t cp : spaces) EXPECT_TRUE(is_python_space(cp)) << cp;
  EXPECT_FALSE(is_python_space(0x180e));  // Mongolian vowel separator: no longer a space
  EXPECT_FALSE(is_python_space(0x200b));  // zero width space is a format character
}

}  // namespace
}  // namespace deltafin
