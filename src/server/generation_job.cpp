#include "server/generation_job.h"

#include <chrono>

#include "util/error.h"

namespace deltafin {

using api::ApiError;

std::string JobResult::finish() const {
  // A turn cut off by max_tokens keeps "length" even with calls, and a stop
  // string "stop".
  if (stopped_by_string) return "stop";
  if (stopped_by_call || (outcome.finish == Finish::Eos && !tool_calls.empty())) return "tool_calls";
  if (outcome.finish == Finish::Eos) return "stop";
  return "length";
}

ApiError shutting_down() {
  return ApiError(503, "The server is shutting down; the request was not completed", "", "shutting_down",
                  "server_error");
}

namespace {

// Runs one admitted job, handing what it shows to `emit` as it comes. `gone`
// says the client left or the server stops; either ends the job as Cancelled.
JobResult run_job(Engine& engine, Job& job, const std::function<bool(const api::OutputDelta&)>& emit,
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
  GenerateRequest request;
  request.prompt = job.prompt.tokens;
  request.chat = job.prompt.chat;
  request.max_new = job.prompt.max_new;
  request.cache_scope = job.cache_scope;
  request.progress = &job.progress;  // the engine writes it, the keep-alives read it
  r.outcome = engine.generate(
      request,
      [&](uint32_t id) {
        show(text.push(id));
        if (text.stopped()) return false;
        return !cancelled();
      },
      cancelled);
  if (!text.stopped_by_string() && r.outcome.finish != Finish::Cancelled && !emit_failed && !left) show(text.finish());
  r.stopped_by_string = text.stopped_by_string() && !emit_failed && !left;
  if (r.stopped_by_string) r.stop_string = text.stop_string();
  r.stopped_by_call = text.stopped() && !text.stopped_by_string() && !emit_failed && !left;
  r.reasoning_tokens = text.reasoning_tokens();
  if (emit_failed || left) r.outcome.finish = Finish::Cancelled;  // a stop for a gone client is a cancel, always
  return r;
}

}  // namespace

void stream_job(Engine& engine, Job& job, AnswerWriter& writer, http::Exchange& ex, int64_t keepalive_ms,
                const std::function<bool()>& stopping, const JobRecorder& record) {
  auto gone = [&] { return ex.peer_closed() || stopping(); };
  bool write_failed = false;
  auto last_write = std::chrono::steady_clock::now();
  auto write = [&](const std::string& s) {
    if (s.empty()) return !write_failed;
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
    const Engine::Progress p = turn ? Engine::Progress::of(job.progress) : Engine::Progress{};
    write(writer.keep_alive(turn ? &p : nullptr));
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
    if (stopping() && !ex.peer_closed()) write(writer.stream_error(shutting_down()));
    return;  // no closing events: the stream is cut
  }
  turn = true;
  if (!early) begin();
  write(writer.stream_start(job));
  JobResult r = run_job(
      engine, job, [&](const api::OutputDelta& d) { return write(writer.on_delta(job, d)); },
      [&] {
        keep_alive();
        return write_failed || gone();
      });
  job.ticket->release();
  record(job, r);
  if (r.outcome.finish == Finish::Cancelled) {
    if (stopping() && !ex.peer_closed()) write(writer.stream_error(shutting_down()));
    return;  // no closing events: the stream is cut, so a client never mistakes it for a whole answer
  }
  write(writer.stream_end(job, r));
  ex.end_stream();
}

void answer_job(Engine& engine, Job& job, AnswerWriter& writer, http::Exchange& ex,
                const std::function<bool()>& stopping, const JobRecorder& record) {
  auto gone = [&] { return ex.peer_closed() || stopping(); };
  if (!job.ticket->wait_turn(gone)) {
    if (stopping()) throw shutting_down();
    return ex.abandon();  // the client left while waiting
  }
  JobResult r = run_job(
      engine, job,
      [&](const api::OutputDelta& d) {
        writer.on_delta(job, d);
        return true;
      },
      gone);
  job.ticket->release();
  record(job, r);
  if (r.outcome.finish == Finish::Cancelled) {
    if (stopping()) throw shutting_down();
    return ex.abandon();  // client gone: nothing reaches it
  }
  ex.respond(200, "application/json", writer.answer(job, r));
}

}  // namespace deltafin
