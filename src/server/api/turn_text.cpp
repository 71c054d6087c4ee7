#include "server/api/turn_text.h"

namespace deltafin::api {

TurnText::TurnText(std::unique_ptr<ChatOutput> chat, std::vector<std::string> stops)
    : chat_(std::move(chat)), stop_(std::move(stops)) {}

TurnText::TurnText(const TokenText& text, std::vector<std::string> stops) : stop_(std::move(stops)) {
  raw_.emplace(text);
}

OutputDelta TurnText::filter(OutputDelta d) {
  if (stop_.stopped()) return {};
  d.content = stop_.push(d.content);
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
  d = filter(std::move(d));
  if (!stop_.stopped()) d.content += stop_.flush();
  return d;
}

}  // namespace deltafin::api
