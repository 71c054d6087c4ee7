// `deltafin serve`: the OpenAI-compatible HTTP API over one loaded model.
//
//   GET  /health                 liveness, the current request's phase, the queue, connections (no key needed)
//   GET  /v1/models              the one model, under its served name
//   GET  /v1/models/{id}
//   POST /v1/chat/completions    JSON or server-sent events (stream: true)
//   POST /v1/completions
//   POST /v1/messages            Anthropic's Messages API, JSON or its events (stream: true)
//   POST /v1/messages/count_tokens
//
// Up to `parallel` generations run at once (Engine's --parallel: stepped
// together, each giving the bits it gives alone), within the session memory
// budget; up to `queue` more wait in arrival order and the rest get 429 with
// Retry-After. A client that goes away, while waiting or
// while its prompt is prefilled or its tokens are made, is noticed (socket
// poll, failed writes) and its work stops within about a second. Every error
// is OpenAI-shaped: {"error": {"message", "type", "param", "code"}}, or on
// the Anthropic routes Anthropic-shaped: {"type": "error", "error": {"type",
// "message"}}; every kind of bad input — bytes, framing, sizes, fields — is a
// 4xx naming where. The API key is taken as "Authorization: Bearer KEY" or
// "x-api-key: KEY" on every route.
// The sockets, limits and deadlines are server/http/connection_loop.h's.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/admission.h"
#include "server/generation_job.h"
#include "server/api/request.h"
#include "engine/engine.h"
#include "server/prepared_prompt.h"
#include "server/http/connection_loop.h"

namespace deltafin {

// Whose prompts a request may reuse (see ApiServer::cache_scope).
enum class PromptCacheScope { Key, Global };

// --max-prefill-seconds' default, ten minutes: the default request timeout
// of the OpenAI and Anthropic SDKs, so a client with default settings would
// give up before a longer prefill ended, and far below the hours a hostile
// megabyte prompt costs.
inline constexpr double kDefaultMaxPrefillSeconds = 600;

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8000;                 // 0 = any free port (bind() says which)
  std::vector<std::string> api_keys;  // any of them is accepted; none = no authentication
  PromptCacheScope prompt_cache_scope = PromptCacheScope::Key;  // with keys: reuse only within a key's requests
  size_t queue = 8;                // requests that may wait behind the running one
  uint64_t max_request_bytes = 8ull << 20;
  std::string model_name;          // the id clients send as "model"
  size_t http_threads = 0;         // generation workers; 0 = queue + parallel + 4 (each client holds one)
  size_t max_connections = 256;    // open connections at once (more get 503)
  int64_t header_timeout_ms = 10'000;  // the whole header block, from its first byte
  int64_t body_timeout_ms = 60'000;    // the whole body, from the end of the head
  int64_t idle_timeout_ms = 10'000;    // a keep-alive connection waiting for its next request
  // A streamed response that has sent nothing for this long (waiting in the
  // queue, or a long prefill: K3's minutes for a long prompt) gets an SSE
  // comment line, which clients ignore but which keeps their read timeouts
  // and proxies from closing the connection: ": prefill DONE/TOTAL" while
  // its prompt is being read, ": keep-alive" otherwise. With keep-alives on,
  // a streamed response starts (200 and headers) as soon as it is admitted,
  // so a queued client gets them too. 0 = never (the stream then starts at
  // the request's turn).
  int64_t keepalive_ms = 5'000;
  bool log_requests = true;        // one line per request on stderr
  // Admission by time: a request whose prefill the engine estimates
  // (Engine::estimate_prefill_seconds, its reused prefix not counted) at more
  // than this many seconds gets 400 prefill_too_long; 0 = no limit.
  double max_prefill_seconds = kDefaultMaxPrefillSeconds;
};

class ApiServer {
public:
  ApiServer(Engine& engine, ServerOptions options);
  ~ApiServer();

  // Binds host:port; returns the port. Throws deltafin::Error when it cannot.
  int bind();
  // Serves until stop() (from any thread, e.g. a signal watcher).
  void serve();
  // Graceful: stops accepting, cancels the running generation (within about
  // a second of model time), answers queued requests 503, and serve()
  // returns once every worker is done.
  void stop();

private:
  void handle(http::Exchange& ex);
  void route(http::Exchange& ex);
  void handle_health(http::Exchange& ex);
  void handle_generation(api::Endpoint endpoint, http::Exchange& ex);
  void handle_messages(http::Exchange& ex, bool count_tokens);
  void check_content_type(const http::Request& req) const;
  int64_t token_count(const api::GenerationRequest& r) const;
  // Admits the job (429 when the queue is full), names it and answers it.
  void run_admitted(std::unique_ptr<Job> job, const std::string& id_prefix, AnswerWriter& writer, http::Exchange& ex);
  void check_auth(const http::Request& req) const;
  int key_index(const http::Request& req) const;
  std::string cache_scope(const http::Request& req) const;
  void send_json(http::Exchange& ex, int status, const nlohmann::json& body, const http::Headers& extra = {}) const;
  void send_error(http::Exchange& ex, const api::ApiError& e, const http::Headers& extra = {}) const;
  double retry_after_seconds() const;
  // The estimated seconds of `prompt`'s prefill (its reusable prefix not
  // counted); 400 prefill_too_long when that exceeds --max-prefill-seconds.
  double check_prefill_time(const PreparedPrompt& prompt, const std::string& scope) const;

  Engine& engine_;
  ServerOptions o_;
  api::RequestLimits limits_;
  Admission admission_;
  std::unique_ptr<http::ConnectionLoop> loop_;
  std::atomic<bool> stopping_{false};
  int64_t started_ = 0;
  std::atomic<double> seconds_per_request_{1.0};  // moving average, for Retry-After
  std::atomic<double> line_prefill_seconds_{0};   // estimated prefill of the requests in line, for the 429
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace deltafin
