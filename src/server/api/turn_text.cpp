#include "server/api/turn_text.h"

namespace deltafin::api {

TurnText::TurnText(const Tokenizer& tokenizer, bool chat, bool thinking, std::vector<std::string> stops)
    : stop_(std::move(stops)) {
  if (chat)
    chat_.emplace(tokenizer, thinking);
  else
    raw_.emplace(tokenizer);
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
