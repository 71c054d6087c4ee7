#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "server/api/openai_format.h"
#include "server/api/turn_text.h"
#include "server/peer_socket.h"
#include "util/error.h"

namespace deltafin {

using api::ApiError;
using nlohmann::json;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// "application/json", optionally with parameters ("; charset=utf-8").
bool is_json_content_type(const std::string& value) {
  std::string v = lower(value);
  v = v.substr(0, v.find(';'));
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v == "application/json";
}

const char* finish_reason(Finish f, bool stopped_by_string) {
  if (stopped_by_string || f == Finish::Eos) return "stop";
  return "length";
}

// One admitted generation request: what it asked for and how to answer.
struct Job {
  api::GenerationRequest request;
  PreparedPrompt prompt;
  api::ResponseHead head;
  std::unique_ptr<Admission::Ticket> ticket;
  std::unique_ptr<PeerSocket> peer;
};

}  // namespace

ApiServer::ApiServer(GenerationService& service, ServerOptions options)
    : service_(service), o_(std::move(options)), admission_(o_.queue), http_(std::make_unique<httplib::Server>()) {
  limits_.model_ids = {o_.model_name};
  limits_.max_tokens_ceiling = service_.max_tokens_ceiling();
  limits_.vocab_size = static_cast<uint32_t>(service_.config().vocab_size);
  started_ = unix_now();
  const size_t threads = o_.http_threads > 0 ? o_.http_threads : o_.queue + 32;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(o_.max_request_bytes);
  http_->set_keep_alive_timeout(5);
  http_->set_tcp_nodelay(true);  // no Nagle: small responses and SSE events go out at once, not after a delayed ACK
  // httplib's default options set SO_REUSEPORT, with which a second server
  // binds a port another is already listening on and the kernel splits the
  // clients between them: SO_REUSEADDR only (a restart may take a port in
  // TIME_WAIT; a busy one is an error). The socket is kept to widen the
  // listen backlog in bind().
  http_->set_socket_options([this](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd_ = sock;
  });
  routes();
}

ApiServer::~ApiServer() = default;

int ApiServer::bind() {
  int port = o_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(o_.host);
    if (port < 0) fail("serve: cannot bind ", o_.host, " to any port");
  } else if (!http_->bind_to_port(o_.host, port)) {
    fail("serve: cannot listen on ", o_.host, ":", port, " (in use, or not an address of this machine?)");
  }
  // httplib listens with a backlog of 5: a burst of clients connecting at
  // once had SYNs dropped and waited a second (the SYN retransmit) to connect.
  if (listen_fd_ >= 0) ::listen(listen_fd_, SOMAXCONN);
  return port;
}

void ApiServer::serve() { http_->listen_after_bind(); }
void ApiServer::stop() { http_->stop(); }

void ApiServer::send_error(httplib::Response& res, const ApiError& e) const {
  res.status = e.status;
  res.set_content(e.body().dump(), "application/json");
}

double ApiServer::retry_after_seconds() const {
  const auto c = admission_.counts();
  return std::max(1.0, std::ceil(seconds_per_request_.load() * static_cast<double>(c.waiting + 1)));
}

void ApiServer::check_auth(const httplib::Request& req) const {
  if (o_.api_key.empty()) return;
  const std::string got = req.get_header_value("Authorization");
  if (got == "Bearer " + o_.api_key) return;
  throw ApiError(401,
                 got.empty() ? "No API key: send the header 'Authorization: Bearer <key>'"
                             : "Incorrect API key in the Authorization header",
                 "", "invalid_api_key", "invalid_request_error");
}

void ApiServer::routes() {
  auto& h = *http_;
  // Authentication before anything else, for every /v1 route.
  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    try {
      check_auth(req);
    } catch (const ApiError& e) {
      send_error(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors httplib produces itself (no route, body too large, bad request
  // line) get an OpenAI-shaped body; responses we already filled are kept.
  h.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = "HTTP " + std::to_string(res.status);
    std::string code, type = "invalid_request_error";
    if (res.status == 404) msg = "Unknown endpoint: " + req.method + " " + req.path, code = "unknown_endpoint", type = "not_found_error";
    if (res.status == 413)
      msg = "The request body is larger than the server's limit of " + std::to_string(o_.max_request_bytes) +
            " bytes (--max-request-bytes)",
      code = "request_too_large";
    if (res.status == 400) msg = "Malformed HTTP request", code = "bad_request";
    send_error(res, ApiError(res.status, msg, "", code, type));
  });
  h.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "Internal error: " + what, "", "internal_error", "server_error"));
  });
  if (o_.log_requests)
    h.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      std::fprintf(stderr, "serve: %s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });

  h.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const auto c = admission_.counts();
    const auto t = service_.totals();
    json j = {{"status", "ok"},
              {"model", o_.model_name},
              {"generating", c.active},
              {"waiting", c.waiting},
              {"refused", c.refused},
              {"requests", t.requests},
              {"prefill_positions", t.prefill_positions},
              {"reused_positions", t.reused_positions},
              {"generated_tokens", t.generated_tokens},
              {"speculation", {{"drafter", service_.draft()}, {"rounds", t.spec_rounds}, {"drafted", t.spec_drafted}, {"accepted", t.spec_accepted}}},
              {"prompt_cache", {{"entries", t.cache_entries}, {"bytes", t.cache_bytes}}}};
    res.set_content(j.dump(), "application/json");
  });
  h.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(api::models_list({o_.model_name}, started_).dump(), "application/json");
  });
  h.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != o_.model_name)
      return send_error(res, ApiError(404, "The model '" + id + "' does not exist; this server serves: " + o_.model_name,
                                      "model", "model_not_found", "not_found_error"));
    res.set_content(api::models_list({o_.model_name}, started_)["data"][0].dump(), "application/json");
  });
  h.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(api::Endpoint::Chat, req, res);
  });
  h.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(api::Endpoint::Completion, req, res);
  });
  for (const char* path : {"/v1/chat/completions", "/v1/completions"})
    h.Get(path, [this](const httplib::Request& req, httplib::Response& res) {
      send_error(res, ApiError(405, "Use POST for " + req.path, "", "method_not_allowed"));
    });
}

namespace {

// Runs one admitted job, handing what it shows to `emit` as it comes and
// returning the finished response's parts. `gone` says the client left.
struct JobResult {
  Outcome outcome;
  std::string reasoning, content;
  bool stopped_by_string = false;
  int64_t reasoning_tokens = 0;
};

JobResult run_job(GenerationService& service, const Job& job, const std::function<bool(const api::OutputDelta&)>& emit,
                  const std::function<bool()>& gone) {
  JobResult r;
  api::TurnText text(service.tokenizer(), job.prompt.chat, job.prompt.thinking, job.request.stop);
  bool emit_failed = false;
  auto show = [&](const api::OutputDelta& d) {
    if (d.empty()) return;
    r.reasoning += d.reasoning;
    r.content += d.content;
    if (!emit(d)) emit_failed = true;
  };
  r.outcome = service.run(
      job.prompt,
      [&](uint32_t id) {
        show(text.push(id));
        if (text.stopped()) return false;
        return !emit_failed && !gone();
      },
      [&] { return emit_failed || gone(); });
  if (!text.stopped() && r.outcome.finish != Finish::Cancelled) show(text.finish());
  r.stopped_by_string = text.stopped();
  r.reasoning_tokens = text.reasoning_tokens();
  if (emit_failed) r.outcome.finish = Finish::Cancelled;
  return r;
}

api::Usage usage_of(const JobResult& r) {
  api::Usage u;
  u.prompt_tokens = r.outcome.prompt_tokens;
  u.completion_tokens = r.outcome.completion_tokens;
  u.cached_tokens = r.outcome.cached_tokens;
  u.reasoning_tokens = r.reasoning_tokens;
  return u;
}

// Waits for the job's turn, then streams it as server-sent events. False
// when the client left (httplib then closes the connection).
bool stream_job(GenerationService& service, Job& job, bool chat, httplib::DataSink& sink,
                const std::function<void(const Job&, const JobResult&)>& record) {
  bool write_failed = false;
  auto write = [&](const std::string& s) {
    if (!write_failed && !sink.write(s.data(), s.size())) write_failed = true;
    return !write_failed;
  };
  const PeerSocket* peer = job.peer.get();
  auto gone = [&] { return write_failed || peer->closed(); };
  if (!job.ticket->wait_turn(gone)) return false;
  if (chat) write(api::sse_event(api::chat_chunk(job.head, {{"role", "assistant"}, {"content", ""}}, std::nullopt)));
  JobResult r = run_job(
      service, job,
      [&](const api::OutputDelta& d) {
        if (chat) {
          if (!d.reasoning.empty()) write(api::sse_event(api::chat_chunk(job.head, {{"reasoning_content", d.reasoning}}, std::nullopt)));
          if (!d.content.empty()) write(api::sse_event(api::chat_chunk(job.head, {{"content", d.content}}, std::nullopt)));
        } else {
          write(api::sse_event(api::text_chunk(job.head, d.content, std::nullopt)));
        }
        return !write_failed;
      },
      gone);
  job.ticket->release();
  record(job, r);
  if (r.outcome.finish == Finish::Cancelled) {
    if (!gone())
      write(api::sse_event(ApiError(503, "The generation was cancelled: the server is shutting down", "", "cancelled",
                                    "server_error")
                               .body()));
    return false;
  }
  const std::string reason = finish_reason(r.outcome.finish, r.stopped_by_string);
  write(api::sse_event(chat ? api::chat_chunk(job.head, json::object(), reason)
                            : api::text_chunk(job.head, "", reason)));
  if (job.request.include_usage) write(api::sse_event(api::usage_chunk(job.head, chat, usage_of(r))));
  write(api::sse_done());
  sink.done();
  return !write_failed;
}

}  // namespace

void ApiServer::handle_generation(api::Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  auto job = std::make_shared<Job>();
  // Found first, while the client is surely still connected: a client that
  // resets after taking its place in line could no longer be found by its
  // address pair (getpeername fails), and would then never be seen leaving.
  job->peer = std::make_unique<PeerSocket>(req.local_port, req.remote_addr, req.remote_port);
  try {
    const std::string ct = req.get_header_value("Content-Type");
    if (!is_json_content_type(ct))
      throw ApiError(415, "Content-Type must be application/json (got '" + ct + "')", "", "unsupported_media_type");
    job->request = api::parse_request(endpoint, req.body, limits_);
    job->prompt = service_.prepare(job->request);
    job->ticket = admission_.try_enter();
    if (!job->ticket) {
      res.set_header("Retry-After", std::to_string(static_cast<int64_t>(retry_after_seconds())));
      throw ApiError(429,
                     "The server is busy: one request is generating and " + std::to_string(o_.queue) +
                         " are waiting (--queue); retry later",
                     "", "queue_full", "rate_limit_error");
    }
  } catch (const ApiError& e) {
    return send_error(res, e);
  }
  const bool chat = endpoint == api::Endpoint::Chat;
  job->head.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(started_) + "-" + std::to_string(next_id_++);
  job->head.created = unix_now();
  job->head.model = o_.model_name;

  auto record = [this](const Job& j, const JobResult& r) {
    const double s = r.outcome.seconds;
    seconds_per_request_.store(0.8 * seconds_per_request_.load() + 0.2 * s);
    if (o_.log_requests)
      std::fprintf(stderr, "serve: %s prompt %lld tokens (%lld reused), %lld generated, %s, %.2f s\n", j.head.id.c_str(),
                   static_cast<long long>(r.outcome.prompt_tokens), static_cast<long long>(r.outcome.cached_tokens),
                   static_cast<long long>(r.outcome.completion_tokens),
                   r.outcome.finish == Finish::Cancelled ? "cancelled" : finish_reason(r.outcome.finish, r.stopped_by_string), s);
  };

  if (!job->request.stream) {
    const PeerSocket* peer = job->peer.get();
    if (!job->ticket->wait_turn([peer] { return peer->closed(); })) return;  // client left while waiting
    JobResult r = run_job(service_, *job, [](const api::OutputDelta&) { return true; }, [peer] { return peer->closed(); });
    job->ticket->release();
    record(*job, r);
    if (r.outcome.finish == Finish::Cancelled)
      return send_error(res, ApiError(503, "The generation was cancelled (server shutting down or client gone)", "",
                                      "cancelled", "server_error"));
    const std::string reason = finish_reason(r.outcome.finish, r.stopped_by_string);
    json body = chat ? api::chat_completion(job->head, r.reasoning, r.content, reason, usage_of(r))
                     : api::text_completion(job->head, r.content, reason, usage_of(r));
    res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    return;
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream", [this, job, chat, record](size_t, httplib::DataSink& sink) {
    // httplib runs this outside its exception handler: an error here ends
    // the stream with an error event instead of the process.
    try {
      return stream_job(service_, *job, chat, sink, record);
    } catch (const std::exception& e) {
      const std::string event =
          api::sse_event(ApiError(500, std::string("Internal error: ") + e.what(), "", "internal_error", "server_error").body());
      sink.write(event.data(), event.size());
      return false;
    }
  });
}

}  // namespace deltafin
