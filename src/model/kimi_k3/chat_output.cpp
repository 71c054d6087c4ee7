#include "model/kimi_k3/chat_output.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

namespace deltafin {

namespace {

// A tag is at most this many tokens between its open/close token and
// <|sep|>; a longer run is not a structural tag and is shown as text rather
// than held back indefinitely. The structural names are 1-3 tokens; a call
// or argument tag carries a tool name or key (OpenAI allows 64 characters).
constexpr size_t kMaxTagTokens = 256;

// A tag's text split into its name and attributes, or nullopt when it is
// not `name( key="value")*` (values unescaped: &quot; and &amp;).
struct TagText {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;

  const std::string* attribute(std::string_view key) const {
    for (const auto& [k, v] : attributes)
      if (k == key) return &v;
    return nullptr;
  }
};

std::optional<TagText> parse_tag_text(const std::string& text) {
  TagText t;
  size_t i = text.find(' ');
  t.name = text.substr(0, i);
  if (t.name.empty()) return std::nullopt;
  while (i != std::string::npos && i < text.size()) {
    // At a space: ` key="value"`.
    const size_t eq = text.find("=\"", i + 1);
    if (eq == std::string::npos || eq == i + 1) return std::nullopt;
    std::string key = text.substr(i + 1, eq - i - 1);
    if (key.find_first_of(" \"") != std::string::npos) return std::nullopt;
    const size_t end = text.find('"', eq + 2);
    if (end == std::string::npos) return std::nullopt;
    std::string value;
    for (size_t j = eq + 2; j < end;) {
      if (text.compare(j, 6, "&quot;") == 0) {
        value += '"';
        j += 6;
      } else if (text.compare(j, 5, "&amp;") == 0) {
        value += '&';
        j += 5;
      } else {
        value += text[j++];
      }
    }
    t.attributes.emplace_back(std::move(key), std::move(value));
    i = end + 1;
    if (i < text.size() && text[i] != ' ') return std::nullopt;
  }
  return t;
}

// `text` as a JSON string literal (invalid UTF-8 would become U+FFFD; the
// decoders only give valid text).
std::string json_quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The literal's inside, without its quotes: a piece of a string value.
std::string json_escaped(const std::string& text) {
  const std::string quoted = json_quoted(text);
  return quoted.substr(1, quoted.size() - 2);
}

}  // namespace

K3ChatOutput::K3ChatOutput(const Tokenizer& tokenizer, bool thinking)
    : tok_(&tokenizer),
      channel_(thinking ? Channel::Reasoning : Channel::Content),
      reasoning_(tokenizer),
      content_(tokenizer),
      arguments_(tokenizer),
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
  if (tools_ == ToolState::Argument || tools_ == ToolState::RawJson) argument_text(arguments_.flush(), out);
  return out;
}

void K3ChatOutput::emit(uint32_t id, ChatDelta& out) {
  if (tools_ == ToolState::Argument || tools_ == ToolState::RawJson)
    argument_text(arguments_.push(id), out);
  else if (channel_ == Channel::Reasoning)
    out.reasoning += reasoning_.push(id);
  else
    out.content += content_.push(id);
}

void K3ChatOutput::argument_text(const std::string& text, ChatDelta& out) {
  if (text.empty()) return;
  ToolCallDelta d;
  d.index = calls_ - 1;
  d.arguments = string_value_ && tools_ == ToolState::Argument ? json_escaped(text) : text;
  out.tool_calls.push_back(std::move(d));
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

void K3ChatOutput::end_argument(ChatDelta& out) {
  argument_text(arguments_.flush(), out);
  if (tools_ == ToolState::Argument && string_value_) {
    ToolCallDelta d;
    d.index = calls_ - 1;
    d.arguments = "\"";
    out.tool_calls.push_back(std::move(d));
  }
  string_value_ = false;
  tools_ = ToolState::Call;
}

void K3ChatOutput::end_call(ChatDelta& out) {
  if (tools_ == ToolState::Argument || tools_ == ToolState::RawJson) end_argument(out);
  ToolCallDelta d;
  d.index = calls_ - 1;
  d.ends = true;
  d.arguments = object_open_ ? "}" : raw_written_ ? "" : "{}";
  out.tool_calls.push_back(std::move(d));
  tools_ = ToolState::Block;
}

// The tags of a tools block (chat_output.h). Returns false for a tag that
// has no meaning where the parser is, which is then shown as text.
bool K3ChatOutput::tool_tag(bool is_open, const std::string& text, ChatDelta& out) {
  const std::optional<TagText> tag = parse_tag_text(text);
  if (!tag) return false;
  const bool bare = tag->attributes.empty();
  const std::string& name = tag->name;
  if (!is_open) {
    if (!bare) return false;
    const bool in_call = tools_ == ToolState::Call || tools_ == ToolState::Argument || tools_ == ToolState::RawJson;
    if (name == "argument" && tools_ == ToolState::Argument) {
      end_argument(out);
    } else if (name == "json" && tools_ == ToolState::RawJson) {
      end_argument(out);
    } else if (name == "call" && in_call) {
      end_call(out);
    } else if (name == "tools" || name == "message") {
      if (in_call) end_call(out);
      tools_ = ToolState::None;
      switch_to(Channel::Content, out);
    } else {
      return false;
    }
    return true;
  }
  if (name == "call" && tools_ == ToolState::Block) {
    const std::string* tool = tag->attribute("tool");
    if (!tool || tool->empty()) return false;
    ToolCallDelta d;
    d.index = calls_++;
    d.begins = true;
    d.name = *tool;
    out.tool_calls.push_back(std::move(d));
    object_open_ = raw_written_ = false;
    tools_ = ToolState::Call;
    return true;
  }
  if (name == "argument" && tools_ == ToolState::Call) {
    const std::string* key = tag->attribute("key");
    const std::string* type = tag->attribute("type");
    if (!key) return false;
    string_value_ = !type || *type == "string";
    ToolCallDelta d;
    d.index = calls_ - 1;
    d.arguments = cat(object_open_ ? ", " : "{", json_quoted(*key), ": ", string_value_ ? "\"" : "");
    out.tool_calls.push_back(std::move(d));
    object_open_ = true;
    tools_ = ToolState::Argument;
    return true;
  }
  if (name == "json" && tools_ == ToolState::Call) {
    raw_written_ = true;
    string_value_ = false;
    tools_ = ToolState::RawJson;
    return true;
  }
  return false;
}

void K3ChatOutput::finish_tag(ChatDelta& out) {
  // tag_ = open/close, name tokens..., <|sep|>; the name holds no special
  // token (push released such a buffer already).
  const bool is_open = tag_.front() == open_id_;
  const std::string name = tok_->decode(std::vector<uint32_t>(tag_.begin() + 1, tag_.end() - 1));
  if (tools_ != ToolState::None) {
    if (!tool_tag(is_open, name, out)) {
      show_tag(out);
      return;
    }
  } else if (is_open && name == "think") {
    switch_to(Channel::Reasoning, out);
  } else if (is_open && name == "tools") {
    switch_to(Channel::Content, out);
    tools_ = ToolState::Block;
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
