#include "server/http_server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "server/anthropic_answer.h"
#include "server/api/anthropic_format.h"
#include "server/api/anthropic_request.h"
#include "server/api/openai_format.h"
#include "server/openai_answer.h"
#include "util/error.h"
#include "util/sha256.h"

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

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// Seconds as a person reads them: whole above 100, else three digits.
std::string seconds_text(double s) {
  char b[32];
  std::snprintf(b, sizeof b, s >= 100 ? "%.0f" : "%.3g", s);
  return b;
}

// The Anthropic route's names for what the chat form calls response_format.
api::ApiError anthropic_names(const api::ApiError& e) {
  if (!e.param.starts_with("response_format")) return e;
  return api::ApiError(e.status, cat("Unsupported value for 'output_config.format': ", e.what()), "output_config.format",
                       e.code, e.type);
}

// The Anthropic Messages routes answer errors in Anthropic's shape.
bool is_anthropic_route(const std::string& path) { return path == "/v1/messages" || path == "/v1/messages/count_tokens"; }

// The generation routes wait for their turn (minutes, behind a long prompt):
// they get the slow lane, everything else the quick one.
bool is_generation_route(const http::Request& r) {
  return r.method == "POST" && (r.path == "/v1/chat/completions" || r.path == "/v1/completions" || r.path == "/v1/messages");
}

}  // namespace

ApiServer::ApiServer(Engine& engine, ServerOptions options)
    : engine_(engine), o_(std::move(options)),
      admission_(o_.queue, static_cast<size_t>(engine.parallel()), engine.session_budget_bytes()) {
  for (const std::string& k : o_.api_keys)
    if (k.empty()) fail("--api-key: an empty key (a key must have at least one character)");
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
  lo.slow_threads = o_.http_threads > 0 ? o_.http_threads : o_.queue + admission_.parallel() + 4;
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
  if (is_anthropic_route(ex.request().path))
    return ex.respond(e.status, "application/json", api::anthropic_error(e).dump(-1, ' ', false, json::error_handler_t::replace), extra);
  send_json(ex, e.status, e.body(), extra);
}

double ApiServer::retry_after_seconds() const {
  const auto c = admission_.counts();
  const double rounds = std::ceil(static_cast<double>(c.waiting + 1) / static_cast<double>(admission_.parallel()));
  return std::max(1.0, std::ceil(seconds_per_request_.load() * rounds));
}

// The key comes as OpenAI's clients send it ("Authorization: Bearer KEY")
// or as Anthropic's do ("x-api-key: KEY"), on every route.
// The key the request carries, if it is one of ours (-1: none matches).
int ApiServer::key_index(const http::Request& req) const {
  const std::optional<std::string> bearer = req.header("Authorization");
  const std::optional<std::string> x_key = req.header("x-api-key");
  for (size_t i = 0; i < o_.api_keys.size(); ++i) {
    if (bearer && constant_time_equal(*bearer, "Bearer " + o_.api_keys[i])) return static_cast<int>(i);
    if (x_key && constant_time_equal(*x_key, o_.api_keys[i])) return static_cast<int>(i);
  }
  return -1;
}

void ApiServer::check_auth(const http::Request& req) const {
  if (o_.api_keys.empty() || key_index(req) >= 0) return;
  const std::optional<std::string> bearer = req.header("Authorization");
  const std::optional<std::string> x_key = req.header("x-api-key");
  throw ApiError(401,
                 !bearer && !x_key ? "No API key: send the header 'Authorization: Bearer <key>' or 'x-api-key: <key>'"
                 : x_key           ? "Incorrect API key in the x-api-key header"
                                   : "Incorrect API key in the Authorization header",
                 "", "invalid_api_key", "authentication_error");
}

// Prompt reuse is scoped per key (--prompt-cache-scope key): a reused
// prefix shows in cached_tokens and in the time to the first token, so a
// client could otherwise learn what another key's clients sent. The scope
// is a hash of the key, so neither RAM nor the state files' names hold it.
std::string ApiServer::cache_scope(const http::Request& req) const {
  if (o_.prompt_cache_scope == PromptCacheScope::Global || o_.api_keys.empty()) return "";
  const int i = key_index(req);
  if (i < 0) return "";
  const std::string& key = o_.api_keys[static_cast<size_t>(i)];
  return "key " + to_hex(sha256(key.data(), key.size()));
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
  if (is_anthropic_route(path)) {
    if (req.method != "POST") throw ApiError(405, "Use POST for " + path, "", "method_not_allowed");
    return handle_messages(ex, path == "/v1/messages/count_tokens");
  }
  throw ApiError(404, "Unknown endpoint: " + http::printable(req.method, 20) + " " + http::printable(path, 200), "",
                 "unknown_endpoint", "not_found_error");
}

namespace {

json progress_json(const Engine::Progress& p, const Engine& engine) {
  json j = {{"phase", p.phase}};
  if (p.phase == "idle") return j;
  j["prompt_tokens"] = p.prompt_tokens;
  j["prefill_done"] = p.prefill_done;
  j["generated_tokens"] = p.generated;
  j["session_bytes"] = engine.session_bytes(p.prefill_done + p.generated, 0);  // what the session holds now
  return j;
}

// /health's "prefill_estimate": the rates, where they come from, and what
// they make of a 1,000- and a 32,000-token prompt with nothing reused.
json prefill_estimate_json(const Engine& engine, double limit) {
  const PrefillEstimate::Report r = engine.prefill_estimate_report();
  return {{"source", r.source},
          {"seconds_per_position", r.seconds_per_position},
          {"seconds_per_pair", r.seconds_per_pair},
          {"pair_rate", r.pair_rate},
          {"prior_pair_ratio", r.prior_pair_ratio},
          {"calibration_samples", r.calibration_samples},
          {"measured_samples", r.measured_samples},
          {"ignored_samples", r.ignored_samples},
          {"context_spread", r.context_spread},
          {"prompt_1k_seconds", engine.estimate_prefill_seconds(1000, 0)},
          {"prompt_32k_seconds", engine.estimate_prefill_seconds(32000, 0)},
          {"max_prefill_seconds", limit}};
}

}  // namespace

void ApiServer::handle_health(http::Exchange& ex) {
  const auto c = admission_.counts();
  const auto t = engine_.totals();
  const auto s = loop_->stats();
  json running = json::array();
  for (const Engine::Progress& p : engine_.running()) running.push_back(progress_json(p, engine_));
  const Engine::StepTotals st = engine_.step_totals();
  json j = {{"status", stopping_.load() ? "stopping" : "ok"},
            {"model", o_.model_name},
            {"context_limit", engine_.context_limit()},
            {"session_budget_bytes", engine_.session_budget_bytes()},
            {"session_bytes_per_position", engine_.session_bytes_per_position()},
            {"sessions_admitted_bytes", c.active_bytes},
            {"current", progress_json(engine_.progress(), engine_)},
            {"running", running},
            {"parallel", admission_.parallel()},
            {"generating", c.active},
            {"waiting", c.waiting},
            {"queue_limit", o_.queue},
            {"refused", c.refused},
            {"steps", {{"steps", st.steps}, {"rows", st.rows}, {"parts", st.parts}, {"prefill_rows", st.prefill_rows},
                       {"decode_rows", st.decode_rows}, {"max_parts", st.max_parts}}},
            {"prompt_cache_scope", o_.prompt_cache_scope == PromptCacheScope::Key ? "key" : "global"},
            {"requests", t.requests},
            {"prefill_positions", t.prefill_positions},
            {"reused_positions", t.reused_positions},
            {"generated_tokens", t.generated_tokens},
            {"speculation", {{"drafter", engine_.drafter()}, {"rounds", t.spec_rounds}, {"drafted", t.spec_drafted}, {"accepted", t.spec_accepted}}},
            {"prompt_cache", {{"entries", t.cache_entries}, {"bytes", t.cache_bytes},
                              {"disk", {{"hits", t.disk_hits}, {"writes", t.disk_writes}, {"rejected", t.disk_rejected},
                                        {"evicted", t.disk_evicted}, {"bytes", t.disk_bytes}}}}},
            {"prefill_estimate", prefill_estimate_json(engine_, o_.max_prefill_seconds)},
            {"connections", {{"open", s.open}, {"accepted", s.accepted}, {"refused", s.refused}, {"timeouts", s.timeouts},
                             {"protocol_errors", s.protocol_errors}, {"buffered_bytes", s.buffered_bytes}}}};
  send_json(ex, 200, j);
}

void ApiServer::check_content_type(const http::Request& req) const {
  const std::string ct = req.header("Content-Type").value_or("");
  if (!is_json_content_type(ct))
    throw ApiError(415, "Content-Type must be application/json (got '" + http::printable(ct, 80) + "')", "",
                   "unsupported_media_type");
  if (stopping_.load() || engine_.shutting_down()) throw shutting_down();
}

void ApiServer::handle_generation(api::Endpoint endpoint, http::Exchange& ex) {
  check_content_type(ex.request());
  auto job = std::make_unique<Job>();
  job->request = api::parse_request(endpoint, ex.request().body, limits_);
  job->prompt = prepare_prompt(engine_, job->request);
  const bool chat = endpoint == api::Endpoint::Chat;
  std::unique_ptr<AnswerWriter> writer = openai_answer(chat);
  run_admitted(std::move(job), chat ? "chatcmpl-" : "cmpl-", *writer, ex);
}

void ApiServer::handle_messages(http::Exchange& ex, bool count_tokens) {
  check_content_type(ex.request());
  api::MessagesRequest m = api::parse_messages_request(ex.request().body, limits_, count_tokens);
  auto job = std::make_unique<Job>();
  job->request = std::move(m.chat);
  try {
    job->prompt = prepare_prompt(engine_, job->request);
  } catch (const ApiError& e) {
    // count_tokens counts a prompt of any length: only the context check refuses it there.
    if (!(count_tokens && e.code == "context_length_exceeded")) throw anthropic_names(e);
    return send_json(ex, 200, {{"input_tokens", token_count(job->request)}});
  }
  if (count_tokens) return send_json(ex, 200, {{"input_tokens", job->prompt.tokens.size()}});
  std::unique_ptr<AnswerWriter> writer = anthropic_answer(m.show_thinking);
  run_admitted(std::move(job), "msg_", *writer, ex);
}

int64_t ApiServer::token_count(const api::GenerationRequest& r) const {
  ChatTurnOptions o;
  o.thinking = r.thinking;
  o.reasoning_effort = r.reasoning_effort;
  o.tools = r.tools;
  o.tool_choice = r.tool_choice;
  o.response_format = r.response_format;
  return static_cast<int64_t>(engine_.chat()->render(r.messages, o).tokens.size());
}

// Admission by time: a prompt's prefill is estimated at the engine's measured
// rates (engine/prefill_estimate.h) for the positions it would not reuse from
// a kept state now; that state may be gone by its turn, so the estimate can
// be low for a request that waits.
double ApiServer::check_prefill_time(const PreparedPrompt& prompt, const std::string& scope) const {
  const int64_t n = static_cast<int64_t>(prompt.tokens.size());
  const int64_t reused = engine_.reusable_prefix(prompt.tokens, scope);
  const double s = engine_.estimate_prefill_seconds(n - reused, reused);
  if (o_.max_prefill_seconds > 0 && s > o_.max_prefill_seconds)
    throw ApiError(400,
                   cat("The prompt's prefill would take too long: ", n, " tokens (", reused,
                       " of them kept from an earlier request) are estimated at ", seconds_text(s),
                       " s of prefill at this server's measured rates; the limit is ",
                       seconds_text(o_.max_prefill_seconds), " s (--max-prefill-seconds). Shorten the prompt"),
                   prompt.chat ? "messages" : "prompt", "prefill_too_long");
  return s;
}

void ApiServer::run_admitted(std::unique_ptr<Job> job, const std::string& id_prefix, AnswerWriter& writer,
                             http::Exchange& ex) {
  const std::string scope = cache_scope(ex.request());
  const double prefill_s = check_prefill_time(job->prompt, scope);
  // The session memory the request may hold: its prompt and every token it may make.
  const auto n = static_cast<int64_t>(job->prompt.tokens.size());
  const int64_t positions = std::min(engine_.context_limit(), n + std::max<int64_t>(job->prompt.max_new, 0));
  job->ticket = admission_.try_enter(engine_.session_bytes(positions, n));
  if (!job->ticket)
    return send_error(ex,
                      ApiError(429,
                               cat("The server is busy: ", admission_.parallel(), " request(s) generating (--parallel) and ",
                                   o_.queue, " waiting (--queue), with an estimated ",
                                   seconds_text(line_prefill_seconds_.load()), " s of prefill among them; retry later"),
                               "", "queue_full", "rate_limit_error"),
                      {{"Retry-After", std::to_string(static_cast<int64_t>(retry_after_seconds()))}});
  job->cache_scope = scope;
  // This request's estimate counts in the line's until it ends.
  struct InLine {
    std::atomic<double>& total;
    double s;
    ~InLine() { total.fetch_sub(s); }
  } in_line{line_prefill_seconds_, prefill_s};
  line_prefill_seconds_.fetch_add(prefill_s);
  const std::string sep = id_prefix.back() == '_' ? "_" : "-";
  job->head.id = id_prefix + std::to_string(started_) + sep + std::to_string(next_id_++);
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
  if (job->request.stream) return stream_job(engine_, *job, writer, ex, o_.keepalive_ms, stopping, record);
  answer_job(engine_, *job, writer, ex, stopping, record);
}

}  // namespace deltafin
