// `deltafin serve`: the OpenAI-compatible HTTP API over one loaded model.
//
//   GET  /health                 liveness, queue and prompt-cache figures (no key needed)
//   GET  /v1/models              the one model, under its served name
//   GET  /v1/models/{id}
//   POST /v1/chat/completions    JSON or server-sent events (stream: true)
//   POST /v1/completions
//
// One generation runs at a time; up to `queue` more wait in arrival order and
// the rest get 429 with Retry-After. A client that goes away, while waiting or
// while its tokens are made, is noticed (socket poll before each token, failed
// writes) and its work stops within one token. Every error is OpenAI-shaped:
// {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "server/admission.h"
#include "server/api/request.h"
#include "server/generation_service.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace deltafin {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8000;                 // 0 = any free port (bind() says which)
  std::string api_key;             // "" = no authentication
  size_t queue = 8;                // requests that may wait behind the running one
  uint64_t max_request_bytes = 8ull << 20;
  std::string model_name;          // the id clients send as "model"
  size_t http_threads = 0;         // 0 = queue + 32: every waiting client holds one
  bool log_requests = true;        // one line per request on stderr
};

class ApiServer {
public:
  ApiServer(GenerationService& service, ServerOptions options);
  ~ApiServer();

  // Binds host:port; returns the port. Throws deltafin::Error when it cannot.
  int bind();
  // Serves until stop() (from any thread, e.g. a signal watcher).
  void serve();
  void stop();

private:
  void routes();
  void handle_generation(api::Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  void check_auth(const httplib::Request& req) const;
  void send_error(httplib::Response& res, const api::ApiError& e) const;
  double retry_after_seconds() const;

  GenerationService& service_;
  ServerOptions o_;
  api::RequestLimits limits_;
  Admission admission_;
  std::unique_ptr<httplib::Server> http_;
  int listen_fd_ = -1;  // the listening socket, once bind() made it
  int64_t started_ = 0;
  std::atomic<double> seconds_per_request_{1.0};  // moving average, for Retry-After
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace deltafin
