#include "server/openai_answer.h"

#include "util/error.h"

namespace deltafin {
namespace {

using nlohmann::json;

api::Usage usage_of(const JobResult& r) {
  api::Usage u;
  u.prompt_tokens = r.outcome.prompt_tokens;
  u.completion_tokens = r.outcome.completion_tokens;
  u.cached_tokens = r.outcome.cached_tokens;
  u.reasoning_tokens = r.reasoning_tokens;
  return u;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

class OpenAiAnswer : public AnswerWriter {
public:
  explicit OpenAiAnswer(bool chat) : chat_(chat) {}

  std::string keep_alive(const Engine::Progress* p) override {
    return p && p->phase == "prefill" ? cat(": prefill ", p->prefill_done, "/", p->prompt_tokens, "\n\n")
                                      : ": keep-alive\n\n";
  }

  std::string stream_start(const Job& job) override {
    if (!chat_) return "";
    return api::sse_event(api::chat_chunk(job.head, {{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}, std::nullopt));
  }

  std::string on_delta(const Job& job, const api::OutputDelta& d) override {
    if (!chat_) return api::sse_event(api::text_chunk(job.head, d.content, std::nullopt));
    std::string out;
    if (!d.reasoning.empty()) out += api::sse_event(api::chat_chunk(job.head, {{"reasoning_content", d.reasoning}}, std::nullopt));
    if (!d.content.empty()) out += api::sse_event(api::chat_chunk(job.head, {{"content", d.content}}, std::nullopt));
    for (const ToolCallDelta& call : d.tool_calls) {
      if (!call.begins && call.arguments.empty()) continue;  // an end without a closing piece
      out += api::sse_event(api::chat_chunk(
          job.head, api::tool_call_chunk_delta(job.head, call.index, call.begins ? &call.name : nullptr, call.arguments),
          std::nullopt));
    }
    return out;
  }

  std::string stream_end(const Job& job, const JobResult& r) override {
    const std::string reason = r.finish();
    std::string out = api::sse_event(chat_ ? api::chat_chunk(job.head, json::object(), reason)
                                           : api::text_chunk(job.head, "", reason));
    if (job.request.include_usage) out += api::sse_event(api::usage_chunk(job.head, chat_, usage_of(r)));
    return out + api::sse_done();
  }

  std::string stream_error(const api::ApiError& e) override { return api::sse_event(e.body()); }

  std::string answer(const Job& job, const JobResult& r) override {
    const std::string reason = r.finish();
    return dump(chat_ ? api::chat_completion(job.head, r.reasoning, r.content, r.tool_calls, reason, usage_of(r))
                      : api::text_completion(job.head, r.content, reason, usage_of(r)));
  }

private:
  bool chat_;
};

}  // namespace

std::unique_ptr<AnswerWriter> openai_answer(bool chat) { return std::make_unique<OpenAiAnswer>(chat); }

}  // namespace deltafin
