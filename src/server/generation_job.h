// One admitted generation request, run and answered: waiting for its turn,
// the engine call, and the answer as one JSON body or as server-sent
// events. What differs between the OpenAI and Anthropic APIs — the shape of
// each event and of the whole answer — is an AnswerWriter
// (server/openai_answer.h, server/anthropic_answer.h); the waiting,
// keep-alives, cancellation and stream cut-off rules are here, once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/admission.h"
#include "server/api/api_error.h"
#include "server/api/openai_format.h"
#include "server/api/request.h"
#include "server/api/turn_text.h"
#include "server/http/exchange.h"
#include "server/prepared_prompt.h"

namespace deltafin {

// One admitted generation request: what it asked for and how to answer.
struct Job {
  api::GenerationRequest request;
  PreparedPrompt prompt;
  api::ResponseHead head;
  std::unique_ptr<Admission::Ticket> ticket;
  std::string cache_scope;  // GenerateRequest::cache_scope
  LiveProgress progress;    // what the engine tells of this job
};

struct JobResult {
  Outcome outcome;
  std::string reasoning, content;
  std::vector<api::ToolCallOut> tool_calls;
  bool stopped_by_string = false;
  std::string stop_string;       // which one, with stopped_by_string
  bool stopped_by_call = false;  // parallel_tool_calls: false, and the first call is complete
  int64_t reasoning_tokens = 0;

  // OpenAI's finish_reason: "stop", "length" or "tool_calls".
  std::string finish() const;
  // The turn ended by itself (end of message, or the one call allowed), not
  // by max_tokens or a stop string.
  bool ended_turn() const { return stopped_by_call || outcome.finish == Finish::Eos; }
};

// How one API shapes a generation's answer.
class AnswerWriter {
public:
  virtual ~AnswerWriter() = default;
  // Keep-alive traffic for a quiet stream: `prefill` says how far the
  // request's prompt is (nullptr while it waits in the queue).
  virtual std::string keep_alive(const Engine::Progress* prefill) = 0;
  // The events that open the answer, at the request's turn.
  virtual std::string stream_start(const Job& job) = 0;
  // The events for one piece of the answer. Called for whole answers too
  // (the result is then dropped), so a writer may build its answer here.
  virtual std::string on_delta(const Job& job, const api::OutputDelta& d) = 0;
  // The events that close a complete answer.
  virtual std::string stream_end(const Job& job, const JobResult& r) = 0;
  // An error event, where the stream is cut short (the server stopping).
  virtual std::string stream_error(const api::ApiError& e) = 0;
  // A whole (not streamed) answer.
  virtual std::string answer(const Job& job, const JobResult& r) = 0;
};

api::ApiError shutting_down();

// Called with each finished job (the server's log line and timing).
using JobRecorder = std::function<void(const Job&, const JobResult&)>;

// Waits for the job's turn, then streams it as server-sent events. With
// keep-alives on (keepalive_ms > 0) the stream starts at once and quiet
// stretches (in the queue, in the prefill) get the writer's keep-alive.
// A cancelled job's stream ends without its closing events, so a client
// never mistakes it for a whole answer.
void stream_job(Engine& engine, Job& job, AnswerWriter& writer, http::Exchange& ex, int64_t keepalive_ms,
                const std::function<bool()>& stopping, const JobRecorder& record);

// Waits for the job's turn, runs it and sends the whole answer. Throws
// shutting_down() when the server stops first.
void answer_job(Engine& engine, Job& job, AnswerWriter& writer, http::Exchange& ex,
                const std::function<bool()>& stopping, const JobRecorder& record);

}  // namespace deltafin
