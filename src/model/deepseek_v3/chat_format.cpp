// The DeepSeek-V3 family's chat formats (chat_format.h says what each renders
// and where it departs from its template). Renderers follow the templates
// branch by branch, keeping their state variables' names (is_last_user,
// is_tool, ...), so each can be read beside its Jinja text
// (tokenizer_files.cpp).
#include "model/deepseek_v3/chat_format.h"

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "format/tiktoken_file.h"
#include "tokenizer/python_format.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Messages, read as the templates read them.

const Json* field(const Json& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() || it->is_null() ? nullptr : &*it;
}

std::string role_of(const Json& m, size_t i) {
  const Json* r = m.is_object() ? field(m, "role") : nullptr;
  if (!r || !r->is_string()) fail("messages[", i, "].role: expected a string");
  const std::string role = r->get<std::string>();
  if (role != "system" && role != "user" && role != "assistant" && role != "tool")
    fail("messages[", i, "].role: \"", role, "\" is not one of system, user, assistant, tool");
  return role;
}

// The content: nullopt when absent or null; text parts joined with `sep`.
std::optional<std::string> content_of(const Json& m, size_t i, const char* sep) {
  const Json* c = field(m, "content");
  if (!c) return std::nullopt;
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) fail("messages[", i, "].content: expected a string or an array of text parts");
  std::string out;
  for (size_t j = 0; j < c->size(); ++j) {
    const Json& part = (*c)[j];
    const Json* text = part.is_object() ? field(part, "text") : nullptr;
    if (!text || !text->is_string())
      fail("messages[", i, "].content[", j, "]: expected a text part with a string \"text\"");
    if (j) out += sep;
    out += text->get<std::string>();
  }
  return out;
}

struct Call {
  std::string type = "function", name, arguments;
  const Json* id = nullptr;
};

// tool_calls: null, absent or [] -> none. Arguments: a string as written, an
// object as Jinja's tojson, absent -> {}.
std::vector<Call> calls_of(const Json& m, size_t i) {
  std::vector<Call> out;
  const Json* list = field(m, "tool_calls");
  if (!list) return out;
  if (!list->is_array()) fail("messages[", i, "].tool_calls: expected an array");
  for (size_t k = 0; k < list->size(); ++k) {
    const Json& c = (*list)[k];
    const std::string path = cat("messages[", i, "].tool_calls[", k, "]");
    const Json* f = c.is_object() ? field(c, "function") : nullptr;
    if (!f || !f->is_object()) fail(path, ".function: expected an object");
    const Json* name = field(*f, "name");
    if (!name || !name->is_string() || name->get<std::string>().empty())
      fail(path, ".function.name: expected a non-empty string");
    Call call;
    call.name = name->get<std::string>();
    if (const Json* type = field(c, "type")) {
      if (!type->is_string()) fail(path, ".type: expected a string");
      call.type = type->get<std::string>();
    }
    const Json* args = field(*f, "arguments");
    if (!args)
      call.arguments = "{}";
    else if (args->is_string())
      call.arguments = args->get<std::string>();
    else
      call.arguments = python_json_dumps(*args, kJsonPythonDefault);
    call.id = field(c, "id");
    out.push_back(std::move(call));
  }
  return out;
}

// json.dumps' default ensure_ascii: every non-ASCII character as \uXXXX
// (a surrogate pair above U+FFFF). In JSON text they only occur in strings.
std::string ensure_ascii(const std::string& json_text) {
  std::string out;
  size_t pos = 0;
  while (pos < json_text.size()) {
    const unsigned char c = static_cast<unsigned char>(json_text[pos]);
    if (c < 0x80) {
      out += json_text[pos++];
      continue;
    }
    uint32_t cp = utf8_next(json_text, &pos);
    auto unit = [&](uint32_t u) {
      static const char hex[] = "0123456789abcdef";
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += hex[(u >> shift) & 15];
    };
    if (cp >= 0x10000) {
      cp -= 0x10000;
      unit(0xD800 + (cp >> 10));
      unit(0xDC00 + (cp & 0x3FF));
    } else {
      unit(cp);
    }
  }
  return out;
}

// The rendered prompt as ids: structure tokens as ids, the text between them
// gathered and encoded as one ordinary section (never yields a special id).
class Pieces {
public:
  explicit Pieces(const TokenText& text) : text_(text) {}
  void text(const std::string& s) { pending_ += s; }
  void id(uint32_t token) {
    flush();
    out_.push_back(token);
  }
  std::vector<uint32_t> finish() {
    flush();
    return std::move(out_);
  }

private:
  void flush() {
    if (pending_.empty()) return;
    const std::vector<uint32_t> ids = text_.encode_ordinary(pending_);
    out_.insert(out_.end(), ids.begin(), ids.end());
    pending_.clear();
  }
  const TokenText& text_;
  std::string pending_;
  std::vector<uint32_t> out_;
};

// What every family here refuses alike; returns whether tools are declared.
bool check_options(const ChatTurnOptions& o, const char* family, bool can_declare) {
  if (!o.response_format.is_null())
    throw ChatOptionError("response_format.type", cat(family, "'s chat template has no way to ask for a response "
                                                      "format, and deltafin does not constrain decoding; leave "
                                                      "response_format out."));
  if (o.tool_choice.is_object() || o.tool_choice == "required")
    throw ChatOptionError("tool_choice", cat(family, "'s chat template cannot ask for a call (only offer tools), and "
                                             "deltafin does not constrain decoding; use \"auto\" or \"none\"."));
  const bool declare = o.tools.is_array() && !o.tools.empty() && o.tool_choice != "none";
  if (declare && !can_declare)
    throw ChatOptionError("tools", cat(family, "'s chat template declares no tools (only V3.1's model card and Kimi "
                                       "K2's template define a tool description); leave tools out or set "
                                       "tool_choice \"none\"."));
  return declare;
}

// ---------------------------------------------------------------------------
// DeepSeek V3 / R1 / V3.1.

struct DeepSeekIds {
  uint32_t bos = 0, eos = 0, user = 0, assistant = 0;
  uint32_t calls_begin = 0, calls_end = 0, call_begin = 0, call_end = 0, sep = 0;
  uint32_t outputs_begin = 0, outputs_end = 0, output_begin = 0, output_end = 0;
  std::optional<uint32_t> think, end_think;
};

std::optional<DeepSeekIds> deepseek_ids(const HfTokenizer& t, DsChatFlavor flavor, std::string* missing) {
  DeepSeekIds ids;
  struct Want {
    const char* spelling;
    uint32_t* id;
  };
  for (const Want& w :
       {Want{"<｜begin▁of▁sentence｜>", &ids.bos}, Want{"<｜end▁of▁sentence｜>", &ids.eos},
        Want{"<｜User｜>", &ids.user}, Want{"<｜Assistant｜>", &ids.assistant},
        Want{"<｜tool▁calls▁begin｜>", &ids.calls_begin}, Want{"<｜tool▁calls▁end｜>", &ids.calls_end},
        Want{"<｜tool▁call▁begin｜>", &ids.call_begin}, Want{"<｜tool▁call▁end｜>", &ids.call_end},
        Want{"<｜tool▁sep｜>", &ids.sep}, Want{"<｜tool▁outputs▁begin｜>", &ids.outputs_begin},
        Want{"<｜tool▁outputs▁end｜>", &ids.outputs_end}, Want{"<｜tool▁output▁begin｜>", &ids.output_begin},
        Want{"<｜tool▁output▁end｜>", &ids.output_end}}) {
    const std::optional<uint32_t> id = t.token_id(w.spelling);
    if (!id) {
      *missing = cat("has no ", w.spelling, " token");
      return std::nullopt;
    }
    *w.id = *id;
  }
  ids.think = t.token_id("<think>");
  ids.end_think = t.token_id("</think>");
  if (flavor != DsChatFlavor::DeepSeekV3 && (!ids.think || !ids.end_think)) {
    *missing = cat("has no <think> / </think> tokens, which ", ds_chat_flavor_name(flavor), "'s template writes");
    return std::nullopt;
  }
  return ids;
}

// The systems, joined as the templates do.
std::string system_prompt(const Json& messages) {
  std::string s;
  bool first = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (role_of(messages[i], i) != "system") continue;
    if (!first) s += "\n\n";
    s += content_of(messages[i], i, "\n").value_or("");
    first = false;
  }
  return s;
}

// What follows the last </think> (R1) or the first (V3.1) in a history turn.
std::string after_think(const std::string& content, bool last) {
  const size_t at = last ? content.rfind("</think>") : content.find("</think>");
  return at == std::string::npos ? content : content.substr(at + 8);
}

class DeepSeekChatFormat final : public ChatFormat {
public:
  DeepSeekChatFormat(DsChatFlavor flavor, const TokenText& text, DeepSeekIds ids)
      : flavor_(flavor), text_(text), ids_(ids) {}

  RenderedChat render(const Json& messages, const ChatTurnOptions& options) const override {
    if (!messages.is_array() || messages.empty()) fail("messages: expected a non-empty array");
    for (size_t i = 0; i < messages.size(); ++i) role_of(messages[i], i);
    const bool v31 = flavor_ == DsChatFlavor::DeepSeekV31;
    const bool declare = check_options(options, ds_chat_flavor_name(flavor_), v31);
    Pieces p(text_);
    p.id(ids_.bos);
    p.text(system_prompt(messages));
    if (declare) tool_description(p, options.tools);
    switch (flavor_) {
      case DsChatFlavor::DeepSeekV3: return {render_v3(p, messages), false};
      case DsChatFlavor::DeepSeekR1: return render_r1(p, messages);
      default: return render_v31(p, messages, options.thinking);
    }
  }

  std::unique_ptr<ChatOutput> output(bool thinking) const override;
  std::vector<uint32_t> end_tokens() const override { return {ids_.eos}; }

private:
  // A call as V3 and R1 write it, after its <｜tool▁call▁begin｜>.
  void fenced_call(Pieces& p, const Call& c) const {
    p.text(c.type);
    p.id(ids_.sep);
    p.text(c.name + "\n```json\n" + c.arguments + "\n```");
    p.id(ids_.call_end);
  }
  void output_block(Pieces& p, const std::string& content) const {
    p.id(ids_.output_begin);
    p.text(content);
    p.id(ids_.output_end);
  }

  std::vector<uint32_t> render_v3(Pieces& p, const Json& messages) const {
    bool is_tool = false, is_output_first = true, is_last_user = false;
    for (size_t i = 0; i < messages.size(); ++i) {
      const Json& m = messages[i];
      const std::string role = role_of(m, i);
      const std::optional<std::string> content = content_of(m, i, "\n");
      if (role == "user") {
        is_tool = false;
        is_last_user = true;
        p.id(ids_.user);
        p.text(content.value_or(""));
        p.id(ids_.assistant);
      } else if (role == "assistant") {
        const std::vector<Call> calls = calls_of(m, i);
        is_last_user = false;
        if (!calls.empty()) {
          if (is_tool) p.id(ids_.outputs_end);
          is_tool = false;
          is_output_first = true;
          for (size_t k = 0; k < calls.size(); ++k) {
            if (k == 0) {
              p.text(content.value_or(""));
              p.id(ids_.calls_begin);
            } else {
              p.text("\n");
            }
            p.id(ids_.call_begin);
            fenced_call(p, calls[k]);
          }
          p.id(ids_.calls_end);
          p.id(ids_.eos);
        } else {
          if (is_tool) p.id(ids_.outputs_end);
          is_tool = false;
          p.text(content.value_or(""));
          p.id(ids_.eos);
        }
      } else if (role == "tool") {
        is_last_user = false;
        is_tool = true;
        if (is_output_first) {
          p.id(ids_.outputs_begin);
          is_output_first = false;
        } else {
          p.text("\n");
        }
        output_block(p, content.value_or(""));
      }
    }
    if (is_tool) p.id(ids_.outputs_end);
    if (!is_last_user && !is_tool) p.id(ids_.assistant);
    return p.finish();
  }

  RenderedChat render_r1(Pieces& p, const Json& messages) const {
    bool is_tool = false, is_output_first = true;
    for (size_t i = 0; i < messages.size(); ++i) {
      const Json& m = messages[i];
      const std::string role = role_of(m, i);
      const std::optional<std::string> content = content_of(m, i, "\n");
      if (role == "user") {
        is_tool = false;
        p.id(ids_.user);
        p.text(content.value_or(""));
      } else if (role == "assistant") {
        const std::vector<Call> calls = calls_of(m, i);
        if (!calls.empty()) {
          is_tool = false;
          for (size_t k = 0; k < calls.size(); ++k) {
            if (k == 0) {
              p.id(ids_.assistant);
              p.text(content.value_or(""));
              p.id(ids_.calls_begin);
            } else {
              p.text("\n");
            }
            p.id(ids_.call_begin);
            fenced_call(p, calls[k]);
          }
          p.id(ids_.calls_end);
          p.id(ids_.eos);
        } else if (is_tool) {
          p.id(ids_.outputs_end);
          p.text(content.value_or(""));
          p.id(ids_.eos);
          is_tool = false;
        } else {
          p.id(ids_.assistant);
          p.text(after_think(content.value_or(""), /*last=*/true));
          p.id(ids_.eos);
        }
        is_output_first = true;  // the template never resets it (chat_format.h)
      } else if (role == "tool") {
        is_tool = true;
        if (is_output_first) p.id(ids_.outputs_begin);
        is_output_first = false;
        output_block(p, content.value_or(""));
      }
    }
    if (is_tool) {
      p.id(ids_.outputs_end);
      return {p.finish(), false};
    }
    p.id(ids_.assistant);
    p.id(*ids_.think);
    p.text("\n");
    return {p.finish(), true};
  }

  RenderedChat render_v31(Pieces& p, const Json& messages, bool thinking) const {
    bool is_tool = false, is_last_user = false;
    for (size_t i = 0; i < messages.size(); ++i) {
      const Json& m = messages[i];
      const std::string role = role_of(m, i);
      const std::optional<std::string> content = content_of(m, i, "\n");
      if (role == "user") {
        is_tool = false;
        is_last_user = true;
        p.id(ids_.user);
        p.text(content.value_or(""));
      } else if (role == "assistant") {
        const std::vector<Call> calls = calls_of(m, i);
        if (is_last_user) {
          p.id(ids_.assistant);
          p.id(*ids_.end_think);  // history turns are non-thinking ('prefix' is not a request field)
        }
        is_last_user = false;
        if (!calls.empty()) {
          is_tool = false;
          for (size_t k = 0; k < calls.size(); ++k) {
            if (k == 0) {
              p.text(content.value_or(""));
              p.id(ids_.calls_begin);
            }
            p.id(ids_.call_begin);
            p.text(calls[k].name);
            p.id(ids_.sep);
            p.text(calls[k].arguments);
            p.id(ids_.call_end);
          }
          p.id(ids_.calls_end);
          p.id(ids_.eos);
        } else if (is_tool) {
          p.text(content.value_or(""));
          p.id(ids_.eos);
          is_tool = false;
        } else {
          p.text(after_think(content.value_or(""), /*last=*/false));
          p.id(ids_.eos);
        }
      } else if (role == "tool") {
        is_last_user = false;
        is_tool = true;
        output_block(p, content.value_or(""));
      }
    }
    if (!is_last_user || is_tool) return {p.finish(), false};
    p.id(ids_.assistant);
    p.id(thinking ? *ids_.think : *ids_.end_think);
    return {p.finish(), thinking};
  }

  // V3.1's model card: "{system prompt}\n\n{tool_description}".
  void tool_description(Pieces& p, const Json& tools) const {
    p.text("\n\n## Tools\nYou have access to the following tools:\n");
    for (size_t k = 0; k < tools.size(); ++k) {
      const Json& f = tools[k].contains("function") ? tools[k]["function"] : tools[k];
      const Json* name = f.is_object() ? field(f, "name") : nullptr;
      if (!name || !name->is_string()) fail("tools[", k, "].function.name: expected a string");
      const Json* description = field(f, "description");
      const Json* parameters = field(f, "parameters");
      p.text("\n### " + name->get<std::string>() + "\nDescription: " +
             (description && description->is_string() ? description->get<std::string>() : "") +
             "\n\nParameters: " +
             ensure_ascii(python_json_dumps(parameters ? *parameters : Json::object(), kJsonPythonDefault)) + "\n");
    }
    p.text("\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n");
    p.id(ids_.calls_begin);
    p.id(ids_.call_begin);
    p.text("tool_call_name");
    p.id(ids_.sep);
    p.text("tool_call_arguments");
    p.id(ids_.call_end);
    p.text("{{additional_tool_calls}}");
    p.id(ids_.calls_end);
    p.text("\n\nWhere:\n\n- `tool_call_name` must be an exact match to one of the available tools\n"
           "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
           "- For multiple tool calls, chain them directly without separators or spaces\n");
  }

  DsChatFlavor flavor_;
  const TokenText& text_;
  DeepSeekIds ids_;
};

// ---------------------------------------------------------------------------
// The answer parser: channels and call sections, for every flavour.

enum class CallForm { Fenced, Plain, KimiK2 };

struct OutputIds {
  std::optional<uint32_t> think, end_think;
  uint32_t section_begin = 0, section_end = 0, call_begin = 0, call_end = 0, sep = 0;
};

// name and arguments of a call's two halves (the text before and after its
// separator token), or nullopt when the call does not have the form.
std::optional<std::pair<std::string, std::string>> parse_call(CallForm form, const std::string& left,
                                                              const std::string& right) {
  if (form == CallForm::Plain) {
    if (left.empty()) return std::nullopt;
    return std::make_pair(left, right);
  }
  if (form == CallForm::Fenced) {
    // {name}\n```json\n{args}\n```
    const size_t nl = right.find("\n```json\n");
    if (nl == std::string::npos || nl == 0 || !right.ends_with("\n```") || right.size() < nl + 9 + 4)
      return std::nullopt;
    return std::make_pair(right.substr(0, nl), right.substr(nl + 9, right.size() - 4 - (nl + 9)));
  }
  // K2: functions.NAME:N (vLLM's parser takes the prefix as optional).
  std::string id = left;
  while (!id.empty() && (id.back() == ' ' || id.back() == '\n')) id.pop_back();
  const size_t colon = id.rfind(':');
  if (colon == std::string::npos || colon + 1 == id.size()) return std::nullopt;
  for (size_t k = colon + 1; k < id.size(); ++k)
    if (id[k] < '0' || id[k] > '9') return std::nullopt;
  std::string name = id.substr(0, colon);
  if (name.starts_with("functions.")) name = name.substr(10);
  if (name.empty()) return std::nullopt;
  return std::make_pair(name, right);
}

class FamilyChatOutput final : public ChatOutput {
public:
  FamilyChatOutput(const TokenText& text, OutputIds ids, CallForm form, bool thinking)
      : text_(text), reasoning_(text), content_(text), ids_(ids), form_(form), in_reasoning_(thinking) {}

  ChatDelta push(uint32_t id) override {
    ChatDelta out;
    if (in_reasoning_) ++reasoning_tokens_;
    if (!call_.empty()) {
      call_.push_back(id);
      if (id == ids_.call_end) finish_call(out);
      return out;
    }
    if (in_section_) {
      if (id == ids_.call_begin) {
        call_.push_back(id);
      } else if (id == ids_.section_end) {
        in_section_ = false;
      } else {
        // Between calls: the template's separator ("\n") is dropped,
        // anything else shown.
        const std::string t = text_.token_bytes(id);
        if (t.find_first_not_of(" \n") != std::string::npos) out.content += release(content_.push(id));
      }
      return out;
    }
    if (id == ids_.section_begin) {
      leave_reasoning(out);
      out.content += release(content_.flush());
      held_newlines_ = 0;
      in_section_ = true;
      return out;
    }
    if (ids_.think && id == *ids_.think && !in_reasoning_) {
      out.content += release(content_.flush());
      in_reasoning_ = true;
      at_start_ = true;
      held_newlines_ = 0;
      return out;
    }
    if (ids_.end_think && id == *ids_.end_think && in_reasoning_) {
      leave_reasoning(out);
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
    if (!call_.empty()) show_call(out);  // cut off: shown as written
    if (in_reasoning_) {
      out.reasoning += release(reasoning_.flush());
      out.reasoning += std::string(held_newlines_, '\n');
    } else {
      out.content += release(content_.flush());
      out.content += std::string(held_newlines_, '\n');
    }
    held_newlines_ = 0;
    return out;
  }

  int64_t reasoning_tokens() const override { return reasoning_tokens_; }

private:
  void leave_reasoning(ChatDelta& out) {
    if (!in_reasoning_) return;
    out.reasoning += release(reasoning_.flush());
    held_newlines_ = 0;  // the newlines before </think> are dropped
    in_reasoning_ = false;
    at_start_ = true;
  }

  // Newlines at a block's start are dropped; trailing ones are held until
  // more text follows (in reasoning, dropped at </think>; flush gives them back).
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

  std::string decode(size_t from, size_t to) const {
    StreamDecoder d(text_);
    std::string s;
    for (size_t k = from; k < to; ++k) s += d.push(call_[k]);
    return s + d.flush();
  }

  // call_ = call_begin, left..., sep, right..., call_end.
  void finish_call(ChatDelta& out) {
    size_t sep = 0;
    for (size_t k = 1; k + 1 < call_.size() && !sep; ++k)
      if (call_[k] == ids_.sep) sep = k;
    std::optional<std::pair<std::string, std::string>> parsed;
    if (sep) parsed = parse_call(form_, decode(1, sep), decode(sep + 1, call_.size() - 1));
    if (!parsed) return show_call(out);
    ToolCallDelta begin;
    begin.index = calls_;
    begin.begins = true;
    begin.name = parsed->first;
    ToolCallDelta end;
    end.index = calls_++;
    end.ends = true;
    end.arguments = parsed->second;
    out.tool_calls = {begin, end};
    call_.clear();
  }

  void show_call(ChatDelta& out) {
    for (uint32_t id : call_) out.content += release(content_.push(id));
    call_.clear();
  }

  const TokenText& text_;
  StreamDecoder reasoning_, content_;
  OutputIds ids_;
  CallForm form_;
  bool in_reasoning_, in_section_ = false, at_start_ = true;
  std::vector<uint32_t> call_;
  size_t calls_ = 0, held_newlines_ = 0;
  int64_t reasoning_tokens_ = 0;
};

std::unique_ptr<ChatOutput> DeepSeekChatFormat::output(bool thinking) const {
  OutputIds o{ids_.think, ids_.end_think, ids_.calls_begin, ids_.calls_end, ids_.call_begin, ids_.call_end, ids_.sep};
  return std::make_unique<FamilyChatOutput>(
      text_, o, flavor_ == DsChatFlavor::DeepSeekV31 ? CallForm::Plain : CallForm::Fenced, thinking);
}

// ---------------------------------------------------------------------------
// Kimi K2.

struct K2Ids {
  uint32_t im_end = 0, im_user = 0, im_assistant = 0, im_system = 0, im_middle = 0;
  uint32_t section_begin = 0, section_end = 0, call_begin = 0, argument_begin = 0, call_end = 0;
};

// A call id as K2 was trained on (chat_format.h): kept when it is K2's own.
std::string k2_call_id(const Call& c, size_t counter) {
  if (c.id && c.id->is_string() && c.id->get<std::string>().starts_with("functions."))
    return c.id->get<std::string>();
  return cat("functions.", c.name, ":", counter);
}

class K2ChatFormat final : public ChatFormat {
public:
  K2ChatFormat(const TokenText& text, K2Ids ids) : text_(text), ids_(ids) {}

  RenderedChat render(const Json& messages, const ChatTurnOptions& options) const override {
    if (!messages.is_array() || messages.empty()) fail("messages: expected a non-empty array");
    for (size_t i = 0; i < messages.size(); ++i) role_of(messages[i], i);
    const bool declare = check_options(options, "Kimi K2", true);
    Pieces p(text_);
    if (declare) {
      p.id(ids_.im_system);
      p.text("tool_declare");
      p.id(ids_.im_middle);
      p.text("\n  # Tools\n  " + python_json_dumps(options.tools, kJsonPythonDefault));
      p.id(ids_.im_end);
    }
    if (role_of(messages[0], 0) != "system") {
      p.id(ids_.im_system);
      p.text("system");
      p.id(ids_.im_middle);
      p.text("You are Kimi, an AI assistant created by Moonshot AI.");
      p.id(ids_.im_end);
    }
    std::map<std::string, std::string> id_map;  // a call's given id -> the id written
    std::vector<std::string> pending;            // written ids not yet answered, in order
    size_t counter = 0;
    for (size_t i = 0; i < messages.size(); ++i) {
      const Json& m = messages[i];
      const std::string role = role_of(m, i);
      const Json* name = field(m, "name");
      const std::string role_name = name && python_truthy(*name) ? python_str(*name, cat("messages[", i, "].name")) : role;
      p.id(role == "user" ? ids_.im_user : role == "assistant" ? ids_.im_assistant : ids_.im_system);
      p.text(role_name);
      p.id(ids_.im_middle);
      const std::optional<std::string> content = content_of(m, i, "");
      const std::vector<Call> calls = role == "assistant" ? calls_of(m, i) : std::vector<Call>{};
      if (!calls.empty()) {
        p.text(content.value_or(""));
        p.id(ids_.section_begin);
        for (const Call& c : calls) {
          const std::string written = k2_call_id(c, counter++);
          if (c.id && c.id->is_string()) id_map[c.id->get<std::string>()] = written;
          pending.push_back(written);
          p.id(ids_.call_begin);
          p.text(written);
          p.id(ids_.argument_begin);
          p.text(c.arguments);
          p.id(ids_.call_end);
        }
        p.id(ids_.section_end);
      } else if (role == "tool") {
        p.text("## Return of " + result_id(m, i, id_map, pending) + "\n    " + content.value_or(""));
      } else {
        p.text(content.value_or(""));
      }
      p.id(ids_.im_end);
    }
    p.id(ids_.im_assistant);
    p.text("assistant");
    p.id(ids_.im_middle);
    return {p.finish(), false};  // K2-Instruct answers without a reasoning block
  }

  std::unique_ptr<ChatOutput> output(bool thinking) const override {
    OutputIds o{std::nullopt, std::nullopt, ids_.section_begin, ids_.section_end,
                ids_.call_begin, ids_.call_end, ids_.argument_begin};
    return std::make_unique<FamilyChatOutput>(text_, o, CallForm::KimiK2, thinking);
  }
  std::vector<uint32_t> end_tokens() const override { return {ids_.im_end}; }

private:
  // The id a result answers: its tool_call_id as the call was written, else
  // the oldest call not yet answered.
  static std::string result_id(const Json& m, size_t i, const std::map<std::string, std::string>& id_map,
                               std::vector<std::string>& pending) {
    std::string written;
    const Json* id = field(m, "tool_call_id");
    if (id && id->is_string()) {
      auto it = id_map.find(id->get<std::string>());
      written = it != id_map.end() ? it->second : id->get<std::string>();
    } else if (!pending.empty()) {
      written = pending.front();
    } else {
      fail("messages[", i, "]: a tool result with no tool_call_id and no call before it to answer");
    }
    for (auto it = pending.begin(); it != pending.end(); ++it)
      if (*it == written) {
        pending.erase(it);
        break;
      }
    return written;
  }

  const TokenText& text_;
  K2Ids ids_;
};

std::optional<std::string> read_chat_template(const std::string& dir, std::string* why) {
  const std::string config = (fs::path(dir) / "tokenizer_config.json").string();
  if (file_exists(config)) {
    Json doc;
    try {
      doc = Json::parse(read_text_file(config));
    } catch (const Json::exception& e) {
      fail(config, ": not valid JSON: ", e.what());
    }
    const Json* t = doc.is_object() ? field(doc, "chat_template") : nullptr;
    if (t && t->is_string()) return t->get<std::string>();
    if (t && t->is_array()) {
      for (const Json& named : *t)
        if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
            named["template"].is_string())
          return named["template"].get<std::string>();
      fail(config, ": chat_template is a list without a \"default\" template");
    }
    if (t) fail(config, ": chat_template is neither a string nor a list of named templates");
  }
  const std::string jinja = (fs::path(dir) / "chat_template.jinja").string();
  if (file_exists(jinja)) return read_text_file(jinja);
  *why = cat(dir, ": neither tokenizer_config.json nor chat_template.jinja has a chat template (a base model)");
  return std::nullopt;
}

bool config_says_kimi_k2(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  if (!file_exists(path)) return false;
  const Json j = Json::parse(read_text_file(path), nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("model_type", "") == "kimi_k2";
}

}  // namespace

DsChatFlavor deepseek_flavor_of_template(const std::string& t) {
  if (t.find("'<｜Assistant｜></think>'") != std::string::npos) return DsChatFlavor::DeepSeekV31;
  if (t.find("'<｜Assistant｜><think>") != std::string::npos) return DsChatFlavor::DeepSeekR1;
  return DsChatFlavor::DeepSeekV3;
}

DeepSeekV3Detected detect_deepseek_v3_flavor(const std::string& dir) {
  DeepSeekV3Detected d;
  d.chat_template = read_chat_template(dir, &d.no_template);
  if (file_exists((fs::path(dir) / "tiktoken.model").string()) || config_says_kimi_k2(dir))
    d.flavor = DsChatFlavor::KimiK2;
  else if (d.chat_template)
    d.flavor = deepseek_flavor_of_template(*d.chat_template);
  return d;
}

std::unique_ptr<ChatFormat> make_deepseek_v3_chat_format(DsChatFlavor flavor, const HfTokenizer& tokenizer,
                                                         const TokenText& text, const std::string& source,
                                                         std::string* why) {
  if (flavor == DsChatFlavor::KimiK2) fail("make_deepseek_v3_chat_format: Kimi K2 has a tiktoken tokenizer");
  std::string missing;
  if (std::optional<DeepSeekIds> ids = deepseek_ids(tokenizer, flavor, &missing))
    return std::make_unique<DeepSeekChatFormat>(flavor, text, *ids);
  *why = cat(source, " ", missing, ", so it cannot render a ", ds_chat_flavor_name(flavor), " chat");
  return nullptr;
}

std::unique_ptr<ChatFormat> make_kimi_k2_chat_format(const Tokenizer& tokenizer, const TokenText& text,
                                                     const std::string& source, std::string* why) {
  K2Ids ids;
  struct Want {
    const char* spelling;
    uint32_t* id;
  };
  for (const Want& w : {Want{"<|im_end|>", &ids.im_end}, Want{"<|im_user|>", &ids.im_user},
                        Want{"<|im_assistant|>", &ids.im_assistant}, Want{"<|im_system|>", &ids.im_system},
                        Want{"<|im_middle|>", &ids.im_middle}, Want{"<|tool_calls_section_begin|>", &ids.section_begin},
                        Want{"<|tool_calls_section_end|>", &ids.section_end}, Want{"<|tool_call_begin|>", &ids.call_begin},
                        Want{"<|tool_call_argument_begin|>", &ids.argument_begin},
                        Want{"<|tool_call_end|>", &ids.call_end}}) {
    const std::optional<uint32_t> id = tokenizer.find_special(w.spelling);
    if (!id) {
      *why = cat(source, " has no ", w.spelling, " token, so it cannot render a Kimi K2 chat");
      return nullptr;
    }
    *w.id = *id;
  }
  return std::make_unique<K2ChatFormat>(text, ids);
}

Tokenizer load_kimi_k2_tokenizer(const std::string& dir) {
  std::vector<std::string> ranks = read_tiktoken_file((fs::path(dir) / "tiktoken.model").string());
  const std::string config = (fs::path(dir) / "tokenizer_config.json").string();
  const SpecialTokens specials = parse_tokenizer_config(read_text_file(config), static_cast<uint32_t>(ranks.size()),
                                                        config, kimi_k2_required_specials());
  std::vector<std::pair<std::string, uint32_t>> pairs;
  for (uint32_t i = 0; i < kReservedTokenCount; ++i) pairs.emplace_back(specials.spellings[i], specials.base + i);
  // K3's pattern is K2's (tokenization_kimi.py's pat_str): K3 kept it.
  return Tokenizer::from_parts(std::move(ranks), pairs, kK3Pattern);
}

std::unique_ptr<DeepSeekV3Tokenizer> load_deepseek_v3_tokenizer(const std::string& dir) {
  auto t = std::make_unique<DeepSeekV3Tokenizer>();
  const DeepSeekV3Detected d = detect_deepseek_v3_flavor(dir);
  t->flavor = d.flavor;
  if (d.flavor == DsChatFlavor::KimiK2) {
    t->tiktoken = std::make_unique<Tokenizer>(load_kimi_k2_tokenizer(dir));
    t->text = token_text(*t->tiktoken);
  } else {
    t->tokenizer_json = (fs::path(dir) / "tokenizer.json").string();
    t->hf = std::make_unique<HfTokenizer>(HfTokenizer::load(t->tokenizer_json));
    t->text = token_text(*t->hf);
  }
  if (!d.chat_template) {
    t->no_chat = d.no_template;
  } else if (t->hf) {
    t->chat = make_deepseek_v3_chat_format(d.flavor, *t->hf, *t->text, t->tokenizer_json, &t->no_chat);
  } else {
    t->chat = make_kimi_k2_chat_format(*t->tiktoken, *t->text, dir + "/tokenizer_config.json", &t->no_chat);
  }
  return t;
}

std::vector<uint32_t> DeepSeekV3FamilyTokenizer::encode(const std::string& text, bool specials) const {
  if (t_->hf) return t_->hf->encode(text, specials);
  return specials ? t_->tiktoken->encode_with_specials(text) : t_->tiktoken->encode_ordinary(text);
}

std::string DeepSeekV3FamilyTokenizer::render_text(const nlohmann::ordered_json& messages,
                                                   const ChatTurnOptions& options) const {
  if (!t_->chat) fail(t_->no_chat);
  const std::vector<uint32_t> ids = t_->chat->render(messages, options).tokens;
  if (t_->hf) return t_->hf->decode(ids);
  return t_->tiktoken->decode(ids);
}

}  // namespace deltafin
