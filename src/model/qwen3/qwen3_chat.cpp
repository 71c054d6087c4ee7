#include "model/qwen3/qwen3_chat.h"

#include "tokenizer/python_format.h"
#include "tokenizer/stream_decoder.h"
#include "util/error.h"

namespace deltafin {

using Json = nlohmann::ordered_json;

std::optional<Qwen3ChatTokens> qwen3_chat_tokens(const HfTokenizer& tokenizer, std::string* why) {
  Qwen3ChatTokens t;
  struct Want {
    const char* spelling;
    uint32_t* id;
  };
  for (const Want& w : {Want{"<|im_start|>", &t.im_start}, Want{"<|im_end|>", &t.im_end}, Want{"<think>", &t.think},
                        Want{"</think>", &t.end_think}}) {
    const std::optional<uint32_t> id = tokenizer.token_id(w.spelling);
    if (!id) {
      if (why) *why = cat("tokenizer.json has no ", w.spelling, " token");
      return std::nullopt;
    }
    *w.id = *id;
  }
  t.end_of_text = tokenizer.token_id("<|endoftext|>");
  t.tool_call = tokenizer.token_id("<tool_call>");
  t.end_tool_call = tokenizer.token_id("</tool_call>");
  t.tool_response = tokenizer.token_id("<tool_response>");
  t.end_tool_response = tokenizer.token_id("</tool_response>");
  return t;
}

namespace {

// The rendered prompt as ids: template tokens as ids, the text between them
// gathered and encoded as one ordinary section.
class Pieces {
public:
  Pieces(const HfTokenizer& tok) : tok_(tok) {}
  void text(const std::string& s) { pending_ += s; }
  void id(uint32_t token) {
    flush();
    out_.push_back(token);
  }
  // An added token when the tokenizer has it, else its spelling as text.
  void tag(const std::optional<uint32_t>& token, const char* spelling) {
    if (token)
      id(*token);
    else
      text(spelling);
  }
  std::vector<uint32_t> finish() {
    flush();
    return std::move(out_);
  }

private:
  void flush() {
    if (pending_.empty()) return;
    const std::vector<uint32_t> ids = tok_.encode(pending_, /*allow_special=*/false);
    out_.insert(out_.end(), ids.begin(), ids.end());
    pending_.clear();
  }
  const HfTokenizer& tok_;
  std::string pending_;
  std::vector<uint32_t> out_;
};

std::string strip_newlines_left(std::string s) {
  s.erase(0, s.find_first_not_of('\n') == std::string::npos ? s.size() : s.find_first_not_of('\n'));
  return s;
}
std::string strip_newlines_right(std::string s) {
  const size_t end = s.find_last_not_of('\n');
  s.erase(end == std::string::npos ? 0 : end + 1);
  return s;
}

// A message's content as one string: a string as given, text parts joined
// with "\n", null as "".
std::string content_text(const Json& m, size_t index) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) fail("messages[", index, "].content: expected a string or an array of text parts");
  std::string out;
  for (size_t j = 0; j < it->size(); ++j) {
    const Json& part = (*it)[j];
    auto text = part.find("text");
    if (!part.is_object() || text == part.end() || !text->is_string())
      fail("messages[", index, "].content[", j, "]: expected a text part with a string \"text\"");
    if (j) out += "\n";
    out += text->get<std::string>();
  }
  return out;
}

std::string role_of(const Json& m, size_t index) {
  auto it = m.find("role");
  if (it == m.end() || !it->is_string()) fail("messages[", index, "].role: expected a string");
  return it->get<std::string>();
}

// The reasoning a history turn carries: reasoning_content (or reasoning) when
// given, else what content holds before "</think>" (content then keeps only
// what follows it), as the template splits it.
std::string split_reasoning(const Json& m, std::string& content) {
  for (const char* key : {"reasoning_content", "reasoning"}) {
    auto it = m.find(key);
    if (it != m.end() && it->is_string()) return it->get<std::string>();
  }
  const size_t close = content.find("</think>");
  if (close == std::string::npos) return "";
  std::string before = strip_newlines_right(content.substr(0, close));
  const size_t open = before.rfind("<think>");
  if (open != std::string::npos) before = before.substr(open + 7);
  content = strip_newlines_left(content.substr(content.rfind("</think>") + 8));
  return strip_newlines_left(before);
}

}  // namespace

RenderedChat Qwen3ChatFormat::render(const Json& messages, const ChatTurnOptions& options) const {
  if (!messages.is_array() || messages.empty()) fail("messages: expected a non-empty array");
  if (!options.response_format.is_null())
    throw ChatOptionError("response_format.type", "Qwen3's chat template has no way to ask for a response format, and "
                                                 "deltafin does not constrain decoding; leave response_format out.");
  const Json& choice = options.tool_choice;
  if (choice.is_object() || choice == "required")
    throw ChatOptionError("tool_choice", "Qwen3's chat template cannot ask for a call (only offer tools), and deltafin "
                                         "does not constrain decoding; use \"auto\" or \"none\".");
  const bool declare_tools = options.tools.is_array() && !options.tools.empty() && choice != "none";
  const size_t n = messages.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string role = role_of(messages[i], i);
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      fail("messages[", i, "].role: \"", role, "\" is not one of system, user, assistant, tool");
  }
  // The last user message that is a query (not a wrapped tool response):
  // reasoning is kept only for turns after it.
  size_t last_query = n - 1;
  for (size_t i = n; i-- > 0;) {
    if (role_of(messages[i], i) != "user") continue;
    const std::string c = content_text(messages[i], i);
    if (c.starts_with("<tool_response>") && c.ends_with("</tool_response>")) continue;
    last_query = i;
    break;
  }
  Pieces p(tok_);
  auto turn = [&](const std::string& role) {
    p.id(ids_.im_start);
    p.text(role + "\n");
  };
  auto end_turn = [&] {
    p.id(ids_.im_end);
    p.text("\n");
  };
  size_t first = 0;
  if (declare_tools) {
    turn("system");
    if (role_of(messages[0], 0) == "system") {
      p.text(content_text(messages[0], 0) + "\n\n");
      first = 1;  // merged into the tools turn
    }
    p.text("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    for (const Json& tool : options.tools) p.text("\n" + python_json_dumps(tool, kJsonPythonDefault));
    p.text("\n</tools>\n\nFor each function call, return a json object with function name and arguments within ");
    p.tag(ids_.tool_call, "<tool_call>");
    p.tag(ids_.end_tool_call, "</tool_call>");
    p.text(" XML tags:\n");
    p.tag(ids_.tool_call, "<tool_call>");
    p.text("\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n");
    p.tag(ids_.end_tool_call, "</tool_call>");
    end_turn();
  }
  // An assistant message's tool_calls, after its content.
  auto write_tool_calls = [&](const Json& m, size_t i, const std::string& content) {
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) return;
    for (size_t k = 0; k < calls->size(); ++k) {
      const Json& call = (*calls)[k];
      const Json& f = call.contains("function") ? call["function"] : call;
      auto name = f.find("name");
      if (name == f.end() || !name->is_string())
        fail("messages[", i, "].tool_calls[", k, "].function.name: expected a string");
      if (k > 0 || !content.empty()) p.text("\n");
      p.tag(ids_.tool_call, "<tool_call>");
      p.text("\n{\"name\": \"" + name->get<std::string>() + "\", \"arguments\": ");
      auto args = f.find("arguments");
      if (args != f.end() && args->is_string())
        p.text(args->get<std::string>());
      else
        p.text(python_json_dumps(args == f.end() ? Json() : *args, kJsonPythonDefault));
      p.text("}\n");
      p.tag(ids_.end_tool_call, "</tool_call>");
    }
  };
  for (size_t i = first; i < n; ++i) {
    const Json& m = messages[i];
    const std::string role = role_of(m, i);
    std::string content = content_text(m, i);
    if (role == "system" || role == "user") {
      turn(role);
      p.text(content);
      end_turn();
      continue;
    }
    if (role == "tool") {
      if (i == 0 || role_of(messages[i - 1], i - 1) != "tool") {
        p.id(ids_.im_start);
        p.text("user");
      }
      p.text("\n");
      p.tag(ids_.tool_response, "<tool_response>");
      p.text("\n" + content + "\n");
      p.tag(ids_.end_tool_response, "</tool_response>");
      if (i + 1 == n || role_of(messages[i + 1], i + 1) != "tool") end_turn();
      continue;
    }
    const std::string reasoning = split_reasoning(m, content);
    turn(role);
    if (i > last_query && (i == n - 1 || !reasoning.empty())) {
      p.id(ids_.think);
      p.text("\n" + strip_newlines_right(strip_newlines_left(reasoning)) + "\n");
      p.id(ids_.end_think);
      p.text("\n\n" + strip_newlines_left(content));
    } else {
      p.text(content);
    }
    write_tool_calls(m, i, content);
    end_turn();
  }
  turn("assistant");
  if (!options.thinking) {
    p.id(ids_.think);
    p.text("\n\n");
    p.id(ids_.end_think);
    p.text("\n\n");
  }
  return RenderedChat{p.finish(), false};  // the model opens its own <think>
}

namespace {

class Qwen3ChatOutput final : public ChatOutput {
public:
  Qwen3ChatOutput(const TokenText& text, Qwen3ChatTokens ids) : text_(text), reasoning_(text), content_(text), ids_(ids) {}

  ChatDelta push(uint32_t id) override {
    ChatDelta out;
    if (in_reasoning_) ++reasoning_tokens_;
    if (!call_.empty()) {
      call_.push_back(id);
      if (id == ids_.end_tool_call) finish_call(out);
      return out;
    }
    if (!in_reasoning_ && ids_.tool_call && id == *ids_.tool_call && ids_.end_tool_call) {
      out.content += release(content_.flush());
      held_newlines_ = 0;  // the template's separator before a call
      call_.push_back(id);
      return out;
    }
    if (id == ids_.think && !in_reasoning_) {
      out.content += release(content_.flush());
      in_reasoning_ = true;
      at_start_ = true;
      held_newlines_ = 0;
      return out;
    }
    if (id == ids_.end_think && in_reasoning_) {
      std::string rest = reasoning_.flush();
      out.reasoning += release(rest);
      held_newlines_ = 0;  // the newlines before </think> are dropped
      in_reasoning_ = false;
      at_start_ = true;
      return out;
    }
    if (in_reasoning_)
      out.reasoning += release(reasoning_.push(id));
    else
      out.content += release(content_.push(id));
    return out;
  }

  ChatDelta flush() override {
    ChatDelta out;
    if (!call_.empty()) show_call(out);  // never closed: shown as written
    if (in_reasoning_) {
      out.reasoning += release(reasoning_.flush());
      out.reasoning += std::string(held_newlines_, '\n');  // an unclosed block keeps them
    } else {
      out.content += release(content_.flush());
      out.content += std::string(held_newlines_, '\n');
    }
    held_newlines_ = 0;
    return out;
  }

  int64_t reasoning_tokens() const override { return reasoning_tokens_; }

private:
  // Newlines at the start of a block are dropped; in reasoning, trailing
  // newlines are held until more text follows (dropped at </think>). In
  // content they are held too, so a turn's text is released the same way
  // in both channels; flush() gives them back.
  std::string release(const std::string& text) {
    std::string out;
    for (char c : text) {
      if (c == '\n') {
        if (!at_start_) ++held_newlines_;
        continue;
      }
      out.append(held_newlines_, '\n');
      held_newlines_ = 0;
      at_start_ = false;
      out += c;
    }
    return out;
  }

  // The held block, <tool_call> ... </tool_call>: one call when it holds
  // {"name": string, "arguments": object}, else shown as content.
  void finish_call(ChatDelta& out) {
    StreamDecoder d(text_);
    std::string body;
    for (size_t k = 1; k + 1 < call_.size(); ++k) body += d.push(call_[k]);
    body += d.flush();
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
    const bool ok = j.is_object() && j.contains("name") && j["name"].is_string() &&
                    (!j.contains("arguments") || j["arguments"].is_object());
    if (!ok) return show_call(out);
    ToolCallDelta begin;
    begin.index = calls_;
    begin.begins = true;
    begin.name = j["name"].get<std::string>();
    ToolCallDelta end;
    end.index = calls_++;
    end.ends = true;
    end.arguments = python_json_dumps(j.contains("arguments") ? j["arguments"] : nlohmann::ordered_json::object(),
                                      kJsonPythonDefault);
    out.tool_calls = {begin, end};
    call_.clear();
  }

  void show_call(ChatDelta& out) {
    for (uint32_t id : call_) out.content += release(content_.push(id));
    call_.clear();
  }

  const TokenText& text_;
  std::vector<uint32_t> call_;
  size_t calls_ = 0;
  StreamDecoder reasoning_, content_;
  Qwen3ChatTokens ids_;
  bool in_reasoning_ = false, at_start_ = true;
  size_t held_newlines_ = 0;
  int64_t reasoning_tokens_ = 0;
};

}  // namespace

std::vector<uint32_t> Qwen3ChatFormat::end_tokens() const {
  std::vector<uint32_t> ends{ids_.im_end};
  if (ids_.end_of_text) ends.push_back(*ids_.end_of_text);
  return ends;
}

std::unique_ptr<ChatOutput> Qwen3ChatFormat::output(bool thinking) const {
  (void)thinking;  // Qwen3 opens its reasoning with <think> itself, whatever the prompt
  return std::make_unique<Qwen3ChatOutput>(text_, ids_);
}

std::unique_ptr<Qwen3ChatFormat> make_qwen3_chat_format(const HfTokenizer& tokenizer, const TokenText& text,
                                                        const std::string& tokenizer_json, std::string* why) {
  std::string missing;
  if (std::optional<Qwen3ChatTokens> ids = qwen3_chat_tokens(tokenizer, &missing))
    return std::make_unique<Qwen3ChatFormat>(tokenizer, text, *ids);
  *why = tokenizer_json + ": " + missing + ", so it cannot render a Qwen3 chat";
  return nullptr;
}

Qwen3FamilyTokenizer::Qwen3FamilyTokenizer(const std::string& tokenizer_json)
    : tok_(HfTokenizer::load(tokenizer_json)),
      text_(token_text(tok_)),
      chat_(make_qwen3_chat_format(tok_, *text_, tokenizer_json, &why_)) {}

std::string Qwen3FamilyTokenizer::render_text(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const {
  if (!chat_) fail(why_);
  return tok_.decode(chat_->render(messages, options).tokens);
}

}  // namespace deltafin
