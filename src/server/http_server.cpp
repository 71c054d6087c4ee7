#include "server/http_server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "server/api/openai_format.h"
#include "server/api/turn_text.h"
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

// Every JSON the server writes: invalid UTF-8 (which validation keeps out)
// would become U+FFFD rather than an exception.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// "application/json", optionally with parameters ("; charset=utf-8").
bool is_json_content_type(const std::string& value) {
  std::string v = lower(value);
  v = v.substr(0, v.find(';'));
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
  return v == "application/json";
}

// Compares without an early exit, so the time taken does not tell how much
// of a guessed key was right.
bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

// A turn that ended (end of message, or the one call parallel_tool_calls:
// false allows) with tool calls finishes with "tool_calls"; one cut off by
// max_tokens keeps "length" even with calls, and a stop string "stop".
const char* finish_reason(Finish f, bool stopped_by_string, bool stopped_by_call, size_t tool_calls) {
  if (stopped_by_string) return "stop";
  if (stopped_by_call || (f == Finish::Eos && tool_calls > 0)) return "tool_calls";
  if (f == Finish::Eos) return "stop";
  return "length";
}

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// The generation routes wait for their turn (minutes, behind a long prompt):
// they get the slow lane, everything else the quick one.
bool is_generation_route(const http::Request& r) {
  return r.method == "POST" && (r.path == "/v1/chat/completions" || r.path == "/v1/completions");
}

// One admitted generation request: what it asked for and how to answer.
struct Job {
  api::GenerationRequest request;
  PreparedPrompt prompt;
  api::ResponseHead head;
  std::unique_ptr<Admission::Ticket> ticket;
};

struct JobResult {
  Outcome outcome;
  std::string reasoning, content;
  std::vector<api::ToolCallOut> tool_calls;
  bool stopped_by_string = false;
  bool stopped_by_call = false;  // parallel_tool_calls: false, and the first call is complete
  int64_t reasoning_tokens = 0;

  std::string finish() const {
    return finish_reason(outcome.finish, stopped_by_string, stopped_by_call, tool_calls.size());
  }
};

// Runs one admitted job, handing what it shows to `emit` as it comes. `gone`
// says the client left or the server stops; either ends the job as Cancelled.
JobResult run_job(Engine& engine, const Job& job, const std::function<bool(const api::OutputDelta&)>& emit,
                  const std::function<bool()>& gone) {
  JobResult r;
  api::TurnText text = job.prompt.chat ? api::TurnText(engine.chat()->output(job.prompt.thinking), job.request.stop,
                                                       !job.request.parallel_tool_calls)
                                       : api::TurnText(engine.text(), job.request.stop);
  bool emit_failed = false, left = false;
  auto cancelled = [&] { return emit_failed || (left = left || gone()); };
  auto show = [&](const api::OutputDelta& d) {
    if (d.empty()) return;
    r.reasoning += d.reasoning;
    r.content += d.content;
    for (const ToolCallDelta& call : d.tool_calls) {
      if (call.begins) r.tool_calls.push_back({api::tool_call_id(job.head, call.index), call.name, ""});
      r.tool_calls.at(call.index).arguments += call.arguments;
    }
    if (!emit(d)) emit_failed = true;
  };
  r.outcome = engine.generate(
      job.prompt.tokens, job.prompt.chat, job.prompt.max_new,
      [&](uint32_t id) {
        show(text.push(id));
        if (text.stopped()) return false;
        return !cancelled();
      },
      cancelled);
  if (!text.stopped_by_string() && r.outcome.finish != Finish::Cancelled && !emit_failed && !left) show(text.finish());
  r.stopped_by_string = text.stopped_by_string() && !emit_failed && !left;
  r.stopped_by_call = text.stopped() && !text.stopped_by_string() && !emit_failed && !left;
  r.reasoning_tokens = text.reasoning_tokens();
  if (emit_failed || left) r.outcome.finish = Finish::Cancelled;  // a stop for a gone client is a cancel, always
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

ApiError shutting_down() {
  return ApiError(503, "The server is shutting down; the request was not completed", "", "shutting_down",
                  "server_error");
}

}  // namespace

ApiServer::ApiServer(Engine& engine, ServerOptions options)
    : engine_(engine), o_(std::move(options)), admission_(o_.queue) {
  limits_.model_ids = {o_.model_name};
  limits_.max_tokens_ceiling = engine_.max_tokens_ceiling();
  limits_.vocab_size = static_cast<uint32_t>(engine_.vocab());
  started_ = unix_now();
  http::LoopOptions lo;
  lo.request.max_body_bytes = o_.max_request_bytes;
  lo.header_timeout = std::chrono::milliseconds(o_.header_timeout_ms);
  lo.body_timeout = std::chrono::milliseconds(o_.body_timeout_ms);
  lo.idle_timeout = std::chrono::milliseconds(o_.idle_timeout_ms);
  lo.max_connections = o_.max_connections;
  // All connections together may hold a few full-size bodies at once, and
  // never less than 64 MiB.
  lo.max_buffered_bytes = std::max<uint64_t>(64ull << 20, 4 * o_.max_request_bytes);
  lo.slow_threads = o_.http_threads > 0 ? o_.http_threads : o_.queue + 4;
  lo.log = o_.log_requests;
  loop_ = std::make_unique<http::ConnectionLoop>(
      lo, [this](http::Exchange& ex) { handle(ex); }, is_generation_route,
      [](int status, const std::string& message, const std::string& code) {
        return dump(ApiError(status, message, "", code, error_type(status)).body());
      });
}

ApiServer::~ApiServer() = default;

int ApiServer::bind() { return loop_->bind(o_.host, o_.port); }
void ApiServer::serve() { loop_->run(); }
void ApiServer::stop() {
  stopping_.store(true);
  loop_->stop();
}

void ApiServer::send_json(http::Exchange& ex, int status, const json& body, const http::Headers& extra) const {
  ex.respond(status, "application/json", dump(body), extra);
}

void ApiServer::send_error(http::Exchange& ex, const ApiError& e, const http::Headers& extra) const {
  send_json(ex, e.status, e.body(), extra);
}

double ApiServer::retry_after_seconds() const {
  const auto c = admission_.counts();
  return std::max(1.0, std::ceil(seconds_per_request_.load() * static_cast<double>(c.waiting + 1)));
}

void ApiServer::check_auth(const http::Request& req) const {
  if (o_.api_key.empty()) return;
  const std::optional<std::string> got = req.header("Authorization");
  if (got && constant_time_equal(*got, "Bearer " + o_.api_key)) return;
  throw ApiError(401,
                 !got ? "No API key: send the header 'Authorization: Bearer <key>'"
                      : "Incorrect API key in the Authorization header",
                 "", "invalid_api_key", "authentication_error");
}

// Every request ends here: whatever a route throws becomes an OpenAI error,
// and nothing escapes to the loop.
void ApiServer::handle(http::Exchange& ex) {
  try {
    route(ex);
  } catch (const ApiError& e) {
    send_error(ex, e);
  } catch (const std::exception& e) {
    send_error(ex, ApiError(500, "Internal error: " + http::printable(e.what(), 400), "", "internal_error",
                            "server_error"));
  }
  if (o_.log_requests)
    std::fprintf(stderr, "serve: %s %s %s -> %d\n", ex.peer().c_str(), ex.request().method.c_str(),
                 http::printable(ex.request().path).c_str(), ex.status());
}

void ApiServer::route(http::Exchange& ex) {
  const http::Request& req = ex.request();
  const std::string& path = req.path;
  const bool get = req.method == "GET" || req.method == "HEAD";
  if (path == "/health") {
    if (!get) throw ApiError(405, "Use GET for /health", "", "method_not_allowed");
    return handle_health(ex);
  }
  if (path.rfind("/v1/", 0) == 0) check_auth(req);
  if (path == "/v1/models") {
    if (!get) throw ApiError(405, "Use GET for /v1/models", "", "method_not_allowed");
    return send_json(ex, 200, api::models_list({o_.model_name}, started_));
  }
  if (path.rfind("/v1/models/", 0) == 0) {
    if (!get) throw ApiError(405, "Use GET for /v1/models/{id}", "", "method_not_allowed");
    const std::string id = path.substr(11);  // decoded and valid UTF-8 (request_parser.h): quoted as it is
    if (id != o_.model_name)
      throw ApiError(404, "The model '" + api::clip(id) + "' does not exist; this server serves: " + o_.model_name,
                     "model", "model_not_found", "not_found_error");
    return send_json(ex, 200, api::models_list({o_.model_name}, started_)["data"][0]);
  }
  for (const auto& [route_path, endpoint] :
       {std::pair{"/v1/chat/completions", api::Endpoint::Chat}, std::pair{"/v1/completions", api::Endpoint::Completion}}) {
    if (path != route_path) continue;
    if (req.method != "POST") throw ApiError(405, "Use POST for " + path, "", "method_not_allowed");
    return handle_generation(endpoint, ex);
  }
  throw ApiError(404, "Unknown endpoint: " + http::printable(req.method, 20) + " " + http::printable(path, 200), "",
                 "unknown_endpoint", "not_found_error");
}

void ApiServer::handle_health(http::Exchange& ex) {
  const auto c = admission_.counts();
  const auto t = engine_.totals();
  const Engine::Progress p = engine_.progress();
  const auto s = loop_->stats();
  json current = {{"phase", p.phase}};
  if (p.phase != "idle") {
    current["prompt_tokens"] = p.prompt_tokens;
    current["prefill_done"] = p.prefill_done;
    current["generated_tokens"] = p.generated;
    const int64_t positions = p.prefill_done + p.generated;
    current["session_bytes"] = engine_.session_bytes(positions, 0);  // what the session holds now
  }
  json j = {{"status", stopping_.load() ? "stopping" : "ok"},
            {"model", o_.model_name},
            {"context_limit", engine_.context_limit()},
            {"session_budget_bytes", engine_.session_budget_bytes()},
            {"session_bytes_per_position", engine_.session_bytes_per_position()},
            {"current", current},
            {"generating", c.active},
            {"waiting", c.waiting},
            {"queue_limit", o_.queue},
            {"refused", c.refused},
            {"requests", t.requests},
            {"prefill_positions", t.prefill_positions},
            {"reused_positions", t.reused_positions},
            {"generated_tokens", t.generated_tokens},
            {"speculation", {{"drafter", engine_.drafter()}, {"rounds", t.spec_rounds}, {"drafted", t.spec_drafted}, {"accepted", t.spec_accepted}}},
            {"prompt_cache", {{"entries", t.cache_entries}, {"bytes", t.cache_bytes},
                              {"disk", {{"hits", t.disk_hits}, {"writes", t.disk_writes}, {"rejected", t.disk_rejected},
                                        {"evicted", t.disk_evicted}, {"bytes", t.disk_bytes}}}}},
            {"connections", {{"open", s.open}, {"accepted", s.accepted}, {"refused", s.refused}, {"timeouts", s.timeouts},
                             {"protocol_errors", s.protocol_errors}, {"buffered_bytes", s.buffered_bytes}}}};
  send_json(ex, 200, j);
}

namespace {

// Waits for the job's turn, then streams it as server-sent events. With
// keep-alives on, the stream starts at once and quiet stretches (in the
// queue, in the prefill) get comment lines (ServerOptions::keepalive_ms).
void stream_job(Engine& engine, Job& job, bool chat, http::Exchange& ex, int64_t keepalive_ms,
                const std::function<bool()>& stopping, const std::function<void(const Job&, const JobResult&)>& record) {
  auto gone = [&] { return ex.peer_closed() || stopping(); };
  bool write_failed = false;
  auto last_write = std::chrono::steady_clock::now();
  auto write = [&](const std::string& s) {
    if (!write_failed && !ex.write(s)) write_failed = true;
    last_write = std::chrono::steady_clock::now();
    return !write_failed;
  };
  const bool early = keepalive_ms > 0;
  auto begin = [&] { ex.begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}}); };
  bool turn = false;  // false while queued: the engine's progress is another request's
  // Called while queued (every 20 ms) and at the engine's stop checks
  // (between prefill slices and after each token).
  auto keep_alive = [&] {
    if (!early || write_failed) return;
    if (std::chrono::steady_clock::now() - last_write < std::chrono::milliseconds(keepalive_ms)) return;
    const Engine::Progress p = turn ? engine.progress() : Engine::Progress{};
    write(p.phase == "prefill" ? cat(": prefill ", p.prefill_done, "/", p.prompt_tokens, "\n\n") : ": keep-alive\n\n");
  };
  if (early) begin();
  if (!job.ticket->wait_turn([&] {
        keep_alive();
        return write_failed || gone();
      })) {
    if (!early) {
      if (stopping()) throw shutting_down();
      ex.abandon();  // the client left while waiting: nothing reaches it
      return;
    }
    if (stopping() && !ex.peer_closed()) write(api::sse_event(shutting_down().body()));
    return;  // no end chunk: the stream is cut
  }
  turn = true;
  if (!early) begin();
  if (chat) write(api::sse_event(api::chat_chunk(job.head, {{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}, std::nullopt)));
  JobResult r = run_job(
      engine, job,
      [&](const api::OutputDelta& d) {
        if (chat) {
          if (!d.reasoning.empty()) write(api::sse_event(api::chat_chunk(job.head, {{"reasoning_content", d.reasoning}}, std::nullopt)));
          if (!d.content.empty()) write(api::sse_event(api::chat_chunk(job.head, {{"content", d.content}}, std::nullopt)));
          for (const ToolCallDelta& call : d.tool_calls) {
            if (!call.begins && call.arguments.empty()) continue;  // an end without a closing piece
            write(api::sse_event(api::chat_chunk(
                job.head, api::tool_call_chunk_delta(job.head, call.index, call.begins ? &call.name : nullptr, call.arguments),
                std::nullopt)));
          }
        } else {
          write(api::sse_event(api::text_chunk(job.head, d.content, std::nullopt)));
        }
        return !write_failed;
      },
      [&] {
        keep_alive();
        return write_failed || gone();
      });
  job.ticket->release();
  record(job, r);
  if (r.outcome.finish == Finish::Cancelled) {
    if (stopping() && !ex.peer_closed()) write(api::sse_event(shutting_down().body()));
    return;  // no end chunk: the stream is cut, so a client never mistakes it for a whole answer
  }
  const std::string reason = r.finish();
  write(api::sse_event(chat ? api::chat_chunk(job.head, json::object(), reason) : api::text_chunk(job.head, "", reason)));
  if (job.request.include_usage) write(api::sse_event(api::usage_chunk(job.head, chat, usage_of(r))));
  write(api::sse_done());
  ex.end_stream();
}

}  // namespace

void ApiServer::handle_generation(api::Endpoint endpoint, http::Exchange& ex) {
  const http::Request& req = ex.request();
  auto job = std::make_unique<Job>();
  const std::string ct = req.header("Content-Type").value_or("");
  if (!is_json_content_type(ct))
    throw ApiError(415, "Content-Type must be application/json (got '" + http::printable(ct, 80) + "')", "",
                   "unsupported_media_type");
  if (stopping_.load() || engine_.shutting_down()) throw shutting_down();
  job->request = api::parse_request(endpoint, req.body, limits_);
  job->prompt = prepare_prompt(engine_, job->request);
  job->ticket = admission_.try_enter();
  if (!job->ticket)
    return send_error(ex,
                      ApiError(429,
                               "The server is busy: one request is generating and " + std::to_string(o_.queue) +
                                   " are waiting (--queue); retry later",
                               "", "queue_full", "rate_limit_error"),
                      {{"Retry-After", std::to_string(static_cast<int64_t>(retry_after_seconds()))}});
  const bool chat = endpoint == api::Endpoint::Chat;
  job->head.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(started_) + "-" + std::to_string(next_id_++);
  job->head.created = unix_now();
  job->head.model = o_.model_name;

  auto record = [this](const Job& j, const JobResult& r) {
    const double s = r.outcome.seconds;
    seconds_per_request_.store(0.8 * seconds_per_request_.load() + 0.2 * s);
    if (o_.log_requests)
      std::fprintf(stderr, "serve: %s prompt %lld tokens (%lld reused, %lld of them from disk), %lld generated, %s, %.2f s\n",
                   j.head.id.c_str(), static_cast<long long>(r.outcome.prompt_tokens),
                   static_cast<long long>(r.outcome.cached_tokens), static_cast<long long>(r.outcome.disk_tokens),
                   static_cast<long long>(r.outcome.completion_tokens),
                   r.outcome.finish == Finish::Cancelled ? "cancelled" : r.finish().c_str(), s);
  };
  // The signal may reach the engine (its shutdown flag) a moment before
  // stop() reaches this server: either one means stopping.
  auto stopping = [this] { return stopping_.load() || engine_.shutting_down(); };

  if (job->request.stream) return stream_job(engine_, *job, chat, ex, o_.keepalive_ms, stopping, record);

  auto gone = [&] { return ex.peer_closed() || stopping(); };
  if (!job->ticket->wait_turn(gone)) {
    if (stopping()) throw shutting_down();
    return ex.abandon();  // the client left while waiting
  }
  JobResult r = run_job(engine_, *job, [](const api::OutputDelta&) { return true; }, gone);
  job->ticket->release();
  record(*job, r);
  if (r.outcome.finish == Finish::Cancelled) {
    if (stopping()) throw shutting_down();
    return ex.abandon();  // client gone: nothing reaches it
  }
  const std::string reason = r.finish();
  send_json(ex, 200,
            chat ? api::chat_completion(job->head, r.reasoning, r.content, r.tool_calls, reason, usage_of(r))
                 : api::text_completion(job->head, r.content, reason, usage_of(r)));
}

}  // namespace deltafin
