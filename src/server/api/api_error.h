// Errors the HTTP API returns, shaped like OpenAI's:
//   HTTP <status>, {"error": {"message", "type", "param", "code"}}
// Everything that validates a request throws ApiError; the server turns it
// into the response, so one type carries status, field and reason together.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace deltafin::api {

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
