#include "model/kimi_k3/chat_format.h"

#include "model/kimi_k3/chat_output.h"
#include "model/kimi_k3/chat/chat_encode.h"
#include "model/kimi_k3/chat/chat_template.h"

namespace deltafin {

namespace {

nlohmann::json unordered(const nlohmann::ordered_json& j) { return nlohmann::json::parse(j.dump()); }

// The request's options as K3's template takes them. Declarations and
// schemas are rendered with sorted keys, so their order does not matter.
// A named tool_choice has no message of its own in K3's template (§9.2):
// it becomes the one tool declared plus tool_choice=required, which asks
// the model for a call of exactly that function (nothing enforces it).
ChatOptions k3_options(const ChatTurnOptions& options) {
  ChatOptions o;
  o.thinking = options.thinking;
  o.reasoning_effort = k3_effort_for(options.reasoning_effort);
  o.tools = unordered(options.tools);
  o.tool_choice = unordered(options.tool_choice);
  o.response_format = unordered(options.response_format);
  if (o.tool_choice.is_object()) {
    const nlohmann::json name = o.tool_choice["function"]["name"];
    nlohmann::json chosen = nlohmann::json::array();
    for (const nlohmann::json& tool : o.tools)
      if (tool.contains("function") && tool["function"].value("name", nlohmann::json()) == name) chosen.push_back(tool);
    o.tools = chosen;
    o.tool_choice = "required";
  }
  return o;
}

}  // namespace

RenderedChat K3ChatFormat::render(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const {
  const ChatOptions o = k3_options(options);
  RenderedChat r;
  r.tokens = encode_chat_segments(tok_, render_chat(messages, o));
  r.thinking = o.thinking;  // the prompt ends with open(think), else open(response)
  return r;
}

std::unique_ptr<ChatOutput> K3ChatFormat::output(bool thinking) const {
  return std::make_unique<K3ChatOutput>(tok_, thinking);
}

K3FamilyTokenizer::K3FamilyTokenizer(const std::string& dir) : tok_(Tokenizer::load(dir)) {}

std::vector<uint32_t> K3FamilyTokenizer::encode(const std::string& text, bool specials) const {
  return specials ? tok_.encode_with_specials(text) : tok_.encode_ordinary(text);
}

std::string K3FamilyTokenizer::render_text(const nlohmann::ordered_json& messages, const ChatTurnOptions& options) const {
  return render_chat_text(render_chat(messages, k3_options(options)));
}

}  // namespace deltafin
