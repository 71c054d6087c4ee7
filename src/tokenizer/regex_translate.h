// Translation of tiktoken pre-tokenizer patterns, written for Rust's
// regex / fancy-regex (what tiktoken runs), into PCRE2 patterns with the same
// matches (k3-model.md §8.2). Three things differ between the engines:
//
//  1. Class set operations. Rust classes nest and intersect:
//     `[\p{Lu}\p{M}&&[^\p{Han}]]`; PCRE2 10.42 has neither. An intersection
//     becomes lookaheads in front of one class: `(?:(?!\p{Han})[\p{Lu}\p{M}])`
//     (one character that is not Han and is in the class); a nested class
//     inside a union becomes an alternation.
//  2. `\s`/`\S`. Rust's \s is exactly Unicode White_Space. PCRE2's UCP \s is
//     "\p{Z} or \h or \v", which also contains U+180E (a format character
//     since Unicode 6.3), and older PCRE2 releases lacked U+0085. Both are
//     spelled as an explicit White_Space class instead.
//  3. Script properties. Rust's `\p{Han}` is Script=Han; PCRE2 (10.40 on)
//     reads an unadorned script name as Script_Extensions, which adds shared
//     punctuation such as U+3001 "、" and U+3002 "。". Script names become
//     `\p{sc:Han}`.
//
// Constructs whose meaning differs and that no supported pattern needs
// (\w, \W, \b, \B, POSIX classes, class difference `--` and symmetric
// difference `~~`) are refused with an error rather than mistranslated.
#pragma once

#include <string>
#include <string_view>

namespace deltafin {

// Rewrites only the class syntax (intersections `&&` and nested classes);
// escapes are kept as written. translate_class_intersection(
// "[\\p{Lu}\\p{M}&&[^\\p{Han}]]") == "(?:(?!\\p{Han})[\\p{Lu}\\p{M}])".
std::string translate_class_intersection(std::string_view pattern);

// The full translation used to compile a pattern: class syntax as above, plus
// \s, \S, \d, \D, \v, \u{...} and script-property rewrites. Compile the result
// with PCRE2_UTF | PCRE2_UCP, PCRE2_DOLLAR_ENDONLY and newline = LF, which
// match Rust's defaults for `.`, `^` and `$`.
std::string translate_to_pcre2(std::string_view pattern);

// The White_Space code points as PCRE2 class items (no brackets), and the
// complement of that set as class items.
extern const char* const kWhiteSpaceClassItems;
extern const char* const kNonWhiteSpaceClassItems;

}  // namespace deltafin
