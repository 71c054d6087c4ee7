// Errors the HTTP API returns, shaped like OpenAI's:
//   HTTP <status>, {"error": {"message", "type", "param", "code"}}
// Everything that validates a request throws ApiError; the server turns it
// into the response, so one type carries status, field and reason together.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deltafin::api {

// At most `max` bytes of valid UTF-8 `s` (cut at a code point boundary, "..."
// when cut): how a value is quoted back in an error message.
inline constexpr size_t kMaxEcho = 120;
inline std::string clip(std::string_view s, size_t max = kMaxEcho) {
  if (s.size() <= max) return std::string(s);
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a code point
  return std::string(s.substr(0, n)) + "...";
}

struct ApiError : std::runtime_error {
  int status;          // HTTP status: 400, 401, 404, 413, 415, 429, 500, 503
  std::string type;    // "invalid_request_error", "authentication_error", "not_found_error", ...
  std::string param;   // the offending field as a path ("messages[2].content"), "" = none (null)
  std::string code;    // machine-readable reason ("unknown_field", ...), "" = none (null)

  ApiError(int status, std::string message, std::string param = "", std::string code = "",
           std::string type = "invalid_request_error")
      : std::runtime_error(std::move(message)), status(status), type(std::move(type)),
        param(std::move(param)), code(std::move(code)) {}

  // {"error": {"message": ..., "type": ..., "param": str|null, "code": str|null}}
  nlohmann::json body() const {
    nlohmann::json e = {{"message", what()}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
    if (!param.empty()) e["param"] = param;
    if (!code.empty()) e["code"] = code;
    return {{"error", e}};
  }
};

}  // namespace deltafin::api
