// Shared request-validation pieces (json_fields.h).
#include "server/api/json_fields.h"

#include <limits>

#include "util/error.h"

namespace deltafin::api::fields {

// ---------------------------------------------------------------------------
// Text quoted back to the client. ApiError::body() is dumped by nlohmann,
// which throws on invalid UTF-8, so everything here stays valid UTF-8.


// Any bytes as valid UTF-8 (invalid sequences become U+FFFD), by nlohmann's
// own notion of validity.
std::string valid_utf8(std::string_view s) {
  const std::string quoted = Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
  return Json::parse(quoted).get<std::string>();
}

// "a string (\"16\")", "a number (1.5)", "a boolean (true)", "null", "an array", "an object".
std::string describe(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return cat("a boolean (", v.dump(), ")");
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return cat("an integer (", v.dump(), ")");
    case Json::value_t::number_float: return cat("a number (", v.dump(), ")");
    case Json::value_t::string: return cat("a string (", Json(clip(v.get_ref<const std::string&>())).dump(), ")");
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    default: return v.type_name();
  }
}

// ---------------------------------------------------------------------------
// Errors. Codes: invalid_json, invalid_type, invalid_value, missing_required_parameter,
// unknown_field, unsupported_value, model_not_found.

[[noreturn]] void invalid_type(const std::string& path, std::string_view expected, const Json& got) {
  throw ApiError(400, cat("Invalid type for '", clip(path), "': expected ", expected, ", but got ", describe(got), "."),
                 path, "invalid_type");
}

[[noreturn]] void invalid_value(const std::string& path, const std::string& what) {
  throw ApiError(400, cat("Invalid value for '", clip(path), "': ", what), path, "invalid_value");
}

[[noreturn]] void unsupported(const std::string& path, const std::string& what) {
  throw ApiError(400, cat("Unsupported value for '", clip(path), "': ", what), path, "unsupported_value");
}

[[noreturn]] void missing(const std::string& path, std::string_view why) {
  throw ApiError(400, cat("Missing required parameter: '", clip(path), "'", why.empty() ? "" : " (", why,
                          why.empty() ? "" : ")", "."),
                 path, "missing_required_parameter");
}

[[noreturn]] void unknown(const std::string& path) {
  throw ApiError(400, cat("Unrecognized request argument supplied: ", clip(path)), path, "unknown_field");
}

// ---------------------------------------------------------------------------
// Parsing with a nesting limit. nlohmann parses and destroys iteratively, but
// copies, comparisons and the renderer's JSON dumper recurse, so accepted
// input is kept shallow. The limit stops the parse as soon as it is crossed.

// Throws TooDeep for text nesting arrays/objects more than kMaxNesting deep;
// otherwise nlohmann's parse (a discarded value for bad JSON when
// allow_exceptions is false).
Json parse_json(std::string_view text, bool allow_exceptions) {
  const Json::parser_callback_t limit = [](int depth, Json::parse_event_t event, Json&) {
    // depth counts the containers around the one starting.
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxNesting) {
      throw TooDeep{};
    }
    return true;
  };
  return Json::parse(text, limit, allow_exceptions);
}

// ---------------------------------------------------------------------------
// Field access and scalar checks.

// The field, or nullptr when absent or null (null means "not given").
const Json* given(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// The field, or nullptr when absent (null is returned as a value).
const Json* present(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}


// An int64 (JSON integers above 2^63-1 parse as unsigned and are out of range).
int64_t int64_field(const Json& v, const std::string& path, std::string_view expected) {
  if (!v.is_number_integer()) invalid_type(path, expected, v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    invalid_value(path, cat("expected ", expected, ", but got ", v.dump(), ", which is above 2^63 - 1."));
  }
  return v.get<int64_t>();
}

bool bool_field(const Json& v, const std::string& path) {
  if (!v.is_boolean()) invalid_type(path, "a boolean", v);
  return v.get<bool>();
}

const std::string& string_field(const Json& v, const std::string& path) {
  if (!v.is_string()) invalid_type(path, "a string", v);
  return v.get_ref<const std::string&>();
}

double number_field(const Json& v, const std::string& path, std::string_view expected) {
  if (!v.is_number()) invalid_type(path, expected, v);
  return v.get<double>();
}

void only_keys(const Json& object, const std::string& path, std::initializer_list<std::string_view> keys) {
  for (auto it = object.begin(); it != object.end(); ++it)
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) unknown(join(path, it.key()));
}

Json parse_body(std::string_view text) {
  Json body;
  try {
    body = parse_json(text, /*allow_exceptions=*/true);
  } catch (const TooDeep&) {
    throw ApiError(400, cat("The request body nests JSON arrays/objects more than ", kMaxNesting, " levels deep."),
                   "", "invalid_value");
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    if (const size_t end = what.find("] "); what.starts_with("[json.exception.") && end != std::string::npos) {
      what.erase(0, end + 2);
    }
    throw ApiError(400, cat("The request body is not valid JSON (at byte ", e.byte, "): ", clip(valid_utf8(what), 400)),
                   "", "invalid_json");
  } catch (const Json::exception& e) {  // e.g. out_of_range 406: a number too large for a double
    throw ApiError(400, cat("The request body is not valid JSON: ", clip(valid_utf8(e.what()), 400)), "",
                   "invalid_json");
  }
  if (!body.is_object()) {
    throw ApiError(400, cat("The request body must be a JSON object, but got ", describe(body), "."), "",
                   "invalid_type");
  }
  return body;
}

}  // namespace deltafin::api::fields
