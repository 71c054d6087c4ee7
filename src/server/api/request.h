// Parsing and validation of /v1/chat/completions and /v1/completions request
// bodies. Pure functions of the body text and the server's limits (no model,
// no I/O), so they are unit-tested exhaustively and fuzzed.
//
// Policy (README "serve"): every field is checked for type and range; a field
// that is not in the accepted list, or a feature deltafin does not honour,
// is a 400 naming the field. JSON null counts as "not given" for optional
// fields, as in OpenAI's API. Decoding is greedy (the target model decides
// every token), so `temperature` must be 0 or absent (anything else would be
// a promise to sample that deltafin does not keep: 400), while `top_p` in
// (0, 1] is accepted because the argmax is always inside the nucleus.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api/api_error.h"

namespace deltafin::api {

enum class Endpoint { Chat, Completion };

struct RequestLimits {
  std::vector<std::string> model_ids;  // the names the server answers to (404 otherwise)
  int64_t max_tokens_ceiling = 0;      // --max-tokens: a larger max_tokens is a 400
  uint32_t vocab_size = 0;             // token-id prompts must be below this
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Chat;
  std::string model;

  // Chat: the messages exactly as given (validated), for render_chat().
  nlohmann::ordered_json messages;
  std::string reasoning_effort = "max";  // "low", "high" or "max"

  // Completion: text (encoded without special tokens) or token ids.
  std::optional<std::string> prompt_text;
  std::vector<uint32_t> prompt_ids;

  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens, >= 1, <= ceiling
  std::vector<std::string> stop;      // 0..4 non-empty strings
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  std::optional<int64_t> seed;        // accepted; greedy decoding does not use it
  std::string user;
};

// Throws ApiError (400 naming the field; 404 for an unknown model).
GenerationRequest parse_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits);

}  // namespace deltafin::api
