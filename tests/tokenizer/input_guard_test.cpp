// The long-input guards (k3-model.md §8.2), against cuts worked out by hand
// from Kimi's _split_whitespaces_or_nonwhitespaces: the run counter starts at
// the class of the first character, resets to 1 on a class change, and a cut
// goes before the character that would make a run longer than the limit.
#include "tokenizer/input_guard.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deltafin {
namespace {

using Slices = std::vector<std::string>;

Slices guard(std::string_view text, size_t max_slice, size_t max_run) {
  Slices out;
  for (std::string_view s : split_long_input(text, max_slice, max_run)) out.emplace_back(s);
  return out;
}

TEST(InputGuard, CutsRunsLongerThanTheLimit) {
  EXPECT_EQ(guard("aaaaa", 100, 2), (Slices{"aa", "aa", "a"}));
  EXPECT_EQ(guard("ab  cd", 100, 2), (Slices{"ab  cd"}));  // no run exceeds 2
  // The cut keeps everything since the previous cut: "c de" stays together.
  EXPECT_EQ(guard("abc de", 100, 2), (Slices{"ab", "c de"}));
  EXPECT_EQ(guard("x    y", 100, 3), (Slices{"x   ", " y"}));
  EXPECT_TRUE(guard("", 100, 2).empty());
}

TEST(InputGuard, ClassIsPythonIsspace) {
  // U+001C..U+001F count as whitespace, U+180E does not; NEL does.
  EXPECT_EQ(guard("\x1c\x1c\x1c", 100, 2), (Slices{"\x1c\x1c", "\x1c"}));
  EXPECT_EQ(guard("a\xe1\xa0\x8e" "b", 100, 2), (Slices{"a\xe1\xa0\x8e", "b"}));
  EXPECT_EQ(guard("a\xc2\x85" "b", 100, 2), (Slices{"a\xc2\x85" "b"}));
}

TEST(InputGuard, CountsScalarsNotBytes) {
  EXPECT_EQ(guard("\xc3\xa9\xc3\xa9\xc3\xa9", 100, 2), (Slices{"\xc3\xa9\xc3\xa9", "\xc3\xa9"}));
  EXPECT_EQ(guard("\xe4\xb8\x80\xe4\xb8\x80\xe4\xb8\x80\xe4\xb8\x80", 3, 100),
            (Slices{"\xe4\xb8\x80\xe4\xb8\x80\xe4\xb8\x80", "\xe4\xb8\x80"}));
}

TEST(InputGuard, SlicesFirstThenRunsWithinEachSlice) {
  EXPECT_EQ(guard("abcdefg", 3, 100), (Slices{"abc", "def", "g"}));
  // Slice "abc" -> "ab" "c"; slice "d" starts a fresh count.
  EXPECT_EQ(guard("abcd", 3, 2), (Slices{"ab", "c", "d"}));
}

TEST(InputGuard, RealLimits) {
  std::string a(25001, 'a');
  EXPECT_EQ(guard(a, kMaxEncodeScalars, kMaxSameClassRun), (Slices{std::string(25000, 'a'), "a"}));
  std::string spaces(50001, ' ');
  EXPECT_EQ(split_long_input(spaces).size(), 3u);
  EXPECT_EQ(split_long_input(spaces)[2], " ");
  std::string exact = "x" + std::string(25000, ' ') + "y";
  EXPECT_EQ(split_long_input(exact).size(), 1u);
  std::string alternating;
  for (int i = 0; i < 200000; ++i) alternating += " a";
  alternating += "b";  // 400,001 scalars
  std::vector<std::string_view> s = split_long_input(alternating);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].size(), 400000u);
  EXPECT_EQ(s[1], "b");
}

}  // namespace
}  // namespace deltafin
