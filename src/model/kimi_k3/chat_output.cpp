#include "model/kimi_k3/chat_output.h"

#include <algorithm>
#include <utility>

namespace deltafin {

namespace {

// A tag is at most this many tokens between its open/close token and
// <|sep|>; a longer run is not a structural tag and is shown as text rather
// than held back indefinitely. The structural names are 1-3 tokens.
constexpr size_t kMaxTagTokens = 64;

}  // namespace

K3ChatOutput::K3ChatOutput(const Tokenizer& tokenizer, bool thinking)
    : tok_(&tokenizer),
      channel_(thinking ? Channel::Reasoning : Channel::Content),
      reasoning_(tokenizer),
      content_(tokenizer),
      open_id_(tokenizer.special_id("<|open|>")),
      close_id_(tokenizer.special_id("<|close|>")),
      sep_id_(tokenizer.special_id("<|sep|>")) {}

ChatDelta K3ChatOutput::push(uint32_t id) {
  // Counted by the channel the token was consumed in, before any switch it
  // causes: the tokens of close(think) count as reasoning, those of
  // open(think) (written from content) do not.
  if (channel_ == Channel::Reasoning) ++reasoning_tokens_;
  ChatDelta out;
  const bool starts_tag = id == open_id_ || id == close_id_;
  if (!tag_.empty()) {
    if (id == sep_id_) {
      tag_.push_back(id);
      finish_tag(out);
    } else if (starts_tag) {
      // The buffered tag never ended; the new open/close begins another.
      show_tag(out);
      tag_.push_back(id);
    } else if (tok_->is_special(id)) {
      // No structural tag contains a special token: release at once.
      tag_.push_back(id);
      show_tag(out);
    } else {
      tag_.push_back(id);
      if (tag_.size() - 1 > kMaxTagTokens) show_tag(out);
    }
    return out;
  }
  if (starts_tag) {
    tag_.push_back(id);
    return out;
  }
  // Ordinary text, a stray <|sep|>, or another special (its spelling).
  emit(id, out);
  return out;
}

ChatDelta K3ChatOutput::flush() {
  ChatDelta out;
  if (!tag_.empty()) show_tag(out);
  out.reasoning += reasoning_.flush();
  out.content += content_.flush();
  return out;
}

void K3ChatOutput::emit(uint32_t id, ChatDelta& out) {
  if (channel_ == Channel::Reasoning)
    out.reasoning += reasoning_.push(id);
  else
    out.content += content_.push(id);
}

void K3ChatOutput::show_tag(ChatDelta& out) {
  // Through the channel's decoder, so the shown text is exactly what
  // Tokenizer::decode gives for these ids in this channel.
  for (uint32_t id : tag_) emit(id, out);
  tag_.clear();
}

void K3ChatOutput::switch_to(Channel channel, ChatDelta& out) {
  if (channel == channel_) return;
  // The old channel's held-back bytes cannot be completed by the other
  // channel's text: a dangling fragment comes out as U+FFFD.
  if (channel_ == Channel::Reasoning)
    out.reasoning += reasoning_.flush();
  else
    out.content += content_.flush();
  channel_ = channel;
}

void K3ChatOutput::finish_tag(ChatDelta& out) {
  // tag_ = open/close, name tokens..., <|sep|>; the name holds no special
  // token (push released such a buffer already).
  const bool is_open = tag_.front() == open_id_;
  const std::string name = tok_->decode(std::vector<uint32_t>(tag_.begin() + 1, tag_.end() - 1));
  if (is_open && name == "think") {
    switch_to(Channel::Reasoning, out);
  } else if ((is_open && name == "response") || (!is_open && name == "think") ||
             (!is_open && name == "response") || (!is_open && name == "message")) {
    switch_to(Channel::Content, out);
  } else {
    show_tag(out);
    return;
  }
  tag_.clear();
}

}  // namespace deltafin
