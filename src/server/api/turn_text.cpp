#include "server/api/turn_text.h"

namespace deltafin::api {

TurnText::TurnText(std::unique_ptr<ChatOutput> chat, std::vector<std::string> stops, bool one_tool_call)
    : chat_(std::move(chat)), stop_(std::move(stops)), one_tool_call_(one_tool_call) {}

TurnText::TurnText(const TokenText& text, std::vector<std::string> stops) : stop_(std::move(stops)) {
  raw_.emplace(text);
}

OutputDelta TurnText::filter(OutputDelta d) {
  if (stopped()) return {};
  d.content = stop_.push(d.content);
  if (stop_.stopped()) {
    d.tool_calls.clear();  // what follows the stop string is not shown
    return d;
  }
  if (one_tool_call_) {
    // Pieces come in order, so whatever follows the first call's end is dropped.
    for (size_t i = 0; i < d.tool_calls.size(); ++i) {
      if (!d.tool_calls[i].ends) continue;
      d.tool_calls.resize(i + 1);
      call_done_ = true;
      break;
    }
  }
  return d;
}

OutputDelta TurnText::push(uint32_t id) {
  if (chat_) return filter(chat_->push(id));
  OutputDelta d;
  d.content = raw_->push(id);
  return filter(std::move(d));
}

OutputDelta TurnText::finish() {
  OutputDelta d;
  if (chat_) {
    d = chat_->flush();
  } else {
    d.content = raw_->flush();
  }
  d = filter(std::move(d));  // after the one call allowed: nothing more from the model
  if (!stop_.stopped()) d.content += stop_.flush();  // content held for a stop string that never came
  return d;
}

}  // namespace deltafin::api
