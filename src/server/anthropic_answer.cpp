#include "server/anthropic_answer.h"

#include <optional>

#include "server/api/anthropic_format.h"
#include "util/error.h"

namespace deltafin {

std::string anthropic_stop_reason(const JobResult& r, size_t tool_uses) {
  if (r.stopped_by_string) return "stop_sequence";
  if (r.ended_turn()) return tool_uses > 0 ? "tool_use" : "end_turn";
  return "max_tokens";
}

namespace {

using json = nlohmann::ordered_json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

api::MessageUsage usage_of(const JobResult& r) {
  api::MessageUsage u;
  u.prompt_tokens = r.outcome.prompt_tokens;
  u.cached_tokens = r.outcome.cached_tokens;
  u.output_tokens = r.outcome.completion_tokens;
  u.thinking_tokens = r.reasoning_tokens;
  return u;
}

std::optional<std::string> stop_sequence(const JobResult& r) {
  if (!r.stopped_by_string) return std::nullopt;
  return r.stop_string;
}

class AnthropicAnswer : public AnswerWriter {
public:
  explicit AnthropicAnswer(bool show_thinking) : show_thinking_(show_thinking) {}

  // A ping event, after the prefill's progress as a comment line.
  std::string keep_alive(const Engine::Progress* p) override {
    const std::string progress =
        p && p->phase == "prefill" ? cat(": prefill ", p->prefill_done, "/", p->prompt_tokens, "\n\n") : "";
    return progress + api::anthropic_ping();
  }

  std::string stream_start(const Job& job) override {
    return api::anthropic_event("message_start",
                                {{"type", "message_start"},
                                 {"message", api::message_start_json(job.head.id, job.head.model,
                                                                     static_cast<int64_t>(job.prompt.tokens.size()))}});
  }

  std::string on_delta(const Job& job, const api::OutputDelta& d) override { return blocks(job).push(d); }

  std::string stream_end(const Job& job, const JobResult& r) override {
    std::string out = blocks(job).finish();
    json delta = {{"stop_reason", anthropic_stop_reason(r, blocks_->tool_uses())}, {"stop_sequence", nullptr}};
    if (r.stopped_by_string) delta["stop_sequence"] = r.stop_string;
    out += api::anthropic_event("message_delta",
                                {{"type", "message_delta"}, {"delta", delta}, {"usage", api::message_usage(usage_of(r))}});
    return out + api::anthropic_event("message_stop", {{"type", "message_stop"}});
  }

  std::string stream_error(const api::ApiError& e) override { return api::anthropic_event("error", api::anthropic_error(e)); }

  std::string answer(const Job& job, const JobResult& r) override {
    blocks(job).finish();
    return dump(api::message_json(job.head.id, job.head.model, blocks_->content(),
                                  anthropic_stop_reason(r, blocks_->tool_uses()), stop_sequence(r), usage_of(r)));
  }

private:
  api::MessageBlocks& blocks(const Job& job) {
    if (!blocks_) blocks_.emplace(job.head.id, show_thinking_);
    return *blocks_;
  }

  bool show_thinking_;
  std::optional<api::MessageBlocks> blocks_;
};

}  // namespace

std::unique_ptr<AnswerWriter> anthropic_answer(bool show_thinking) {
  return std::make_unique<AnthropicAnswer>(show_thinking);
}

}  // namespace deltafin
