// libFuzzer target: request validation (server/api/request.h).
//
// The input bytes are a request body, parsed for both OpenAI endpoints and
// as an Anthropic Messages body (create and count_tokens). ApiError is
// the one expected failure, and its response body must serialise (no invalid
// UTF-8 quoted back). Any other exception, crash or sanitizer report is a bug.
//
// A chat request that passes validation is rendered with render_chat (thinking
// on and off): validation promises that every accepted request renders, so a
// deltafin::Error from the renderer means the two disagree, and aborts.
//
// Run with scripts/fuzz.sh; the seed corpus is fuzz/corpus/request/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "server/api/anthropic_format.h"
#include "server/api/anthropic_request.h"
#include "server/api/request.h"
#include "model/kimi_k3/chat/chat_template.h"
#include "util/error.h"

namespace {

using deltafin::api::ApiError;
using deltafin::api::Endpoint;
using deltafin::api::GenerationRequest;
using deltafin::api::RequestLimits;

const RequestLimits& limits() {
  static const RequestLimits l{{"m"}, 100, 1000};
  return l;
}

void check_accepted(const GenerationRequest& req, Endpoint endpoint, size_t max_stops = 4) {
  const auto bad = [](const char* what) {
    std::fprintf(stderr, "accepted request breaks its contract: %s\n", what);
    std::abort();
  };
  if (req.endpoint != endpoint) bad("endpoint");
  if (req.model != "m") bad("model");
  if (req.max_tokens && (*req.max_tokens < 1 || *req.max_tokens > 100)) bad("max_tokens range");
  if (req.stop.size() > max_stops) bad("too many stop strings");
  for (const auto& s : req.stop) {
    if (s.empty()) bad("empty stop string");
  }
  if (req.include_usage && !req.stream) bad("include_usage without stream");
  if (endpoint == Endpoint::Completion) {
    if (req.prompt_text.has_value() == !req.prompt_ids.empty()) bad("exactly one of prompt_text / prompt_ids");
    if (req.prompt_text && req.prompt_text->empty()) bad("empty prompt");
    for (uint32_t id : req.prompt_ids) {
      if (id >= 1000) bad("token id >= vocab");
    }
    return;
  }
  if (!req.messages.is_array() || req.messages.empty()) bad("messages");
  for (const bool thinking : {true, false}) {
    deltafin::ChatOptions options;
    options.thinking = thinking;
    options.reasoning_effort = deltafin::k3_effort_for(req.reasoning_effort);
    options.tools = nlohmann::json::parse(req.tools.dump());
    options.tool_choice = nlohmann::json::parse(req.tool_choice.dump());
    options.response_format = nlohmann::json::parse(req.response_format.dump());
    try {
      (void)deltafin::render_chat(req.messages, options);
    } catch (const deltafin::Error& e) {
      std::fprintf(stderr, "accepted chat request does not render (thinking=%d): %s\n", thinking, e.what());
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const Endpoint endpoint : {Endpoint::Chat, Endpoint::Completion}) {
    try {
      const GenerationRequest req = deltafin::api::parse_request(endpoint, body, limits());
      check_accepted(req, endpoint);
    } catch (const ApiError& e) {
      // What the server sends: must not throw (e.g. on invalid UTF-8).
      (void)e.body().dump();
      if (e.status != 400 && e.status != 404) {
        std::fprintf(stderr, "unexpected status %d: %s\n", e.status, e.what());
        std::abort();
      }
    }
  }
  // The same bytes as an Anthropic Messages body: an accepted one is a chat
  // request that renders, and its errors serialise in Anthropic's shape.
  for (const bool count_tokens : {false, true}) {
    try {
      const deltafin::api::MessagesRequest m = deltafin::api::parse_messages_request(body, limits(), count_tokens);
      check_accepted(m.chat, Endpoint::Chat, 16);
    } catch (const ApiError& e) {
      (void)deltafin::api::anthropic_error(e).dump();
      if (e.status != 400 && e.status != 404) {
        std::fprintf(stderr, "unexpected status %d: %s\n", e.status, e.what());
        std::abort();
      }
    }
  }
  return 0;
}
