// The pieces every request validator here is made of (request.cpp for the
// OpenAI routes, anthropic_request.cpp for the Anthropic one): parsing a body
// with a nesting limit, reading a field as a type, and the ApiErrors that name
// a field by its path ("messages[2].content[0].type"). Every message quotes
// values back clipped and as valid UTF-8, so ApiError::body() always
// serialises.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api/api_error.h"

namespace deltafin::api::fields {

using Json = nlohmann::ordered_json;

// Arrays/objects inside one another, in a body and in a tool call's
// arguments string: copies, comparisons and the renderers' JSON writers
// recurse, so accepted input is kept shallow.
inline constexpr int kMaxNesting = 64;

// Any bytes as valid UTF-8 (invalid sequences become U+FFFD).
std::string valid_utf8(std::string_view s);
// "a string (\"16\")", "a number (1.5)", "a boolean (true)", "null", "an array", "an object".
std::string describe(const Json& v);

// Errors, status 400, with the field's path as param. Codes: invalid_type,
// invalid_value, unsupported_value, missing_required_parameter, unknown_field.
[[noreturn]] void invalid_type(const std::string& path, std::string_view expected, const Json& got);
[[noreturn]] void invalid_value(const std::string& path, const std::string& what);
[[noreturn]] void unsupported(const std::string& path, const std::string& what);
[[noreturn]] void missing(const std::string& path, std::string_view why = "");
[[noreturn]] void unknown(const std::string& path);

// Thrown by parse_json for text nesting more than kMaxNesting deep.
struct TooDeep {};
// nlohmann's parse with the nesting limit (a discarded value for bad JSON
// when allow_exceptions is false).
Json parse_json(std::string_view text, bool allow_exceptions);
// A request body: a JSON object, or ApiError 400 (invalid_json, invalid_type,
// invalid_value for nesting) saying where it went wrong.
Json parse_body(std::string_view text);

// The field, or nullptr when absent or null (null means "not given").
const Json* given(const Json& object, const char* key);
// The field, or nullptr when absent (null is returned as a value).
const Json* present(const Json& object, const char* key);

inline std::string join(const std::string& path, std::string_view key) { return path + "." + std::string(key); }
inline std::string index(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// A value of the type, or invalid_type naming `path`. int64: integers above
// 2^63-1 are out of range.
int64_t int64_field(const Json& v, const std::string& path, std::string_view expected);
bool bool_field(const Json& v, const std::string& path);
const std::string& string_field(const Json& v, const std::string& path);
double number_field(const Json& v, const std::string& path, std::string_view expected);

bool contains(const auto& list, std::string_view key) {
  return std::find(std::begin(list), std::end(list), key) != std::end(list);
}
// unknown() for the first key of `object` not in `keys`.
void only_keys(const Json& object, const std::string& path, std::initializer_list<std::string_view> keys);

}  // namespace deltafin::api::fields
