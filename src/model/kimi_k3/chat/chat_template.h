// The K3 chat renderer (k3-model.md §9): turns an OpenAI-style message list
// plus request options into XTML segments. A segment is either control (the
// tokenizer may turn special spellings in it into special ids) or ordinary
// (never yields a special id, so user text such as "<|open|>" stays plain
// text). Segments are tokenised one by one, so their boundaries are part of
// the rendering: BPE never merges across them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace deltafin {

struct ChatSegment {
  std::string text;
  bool control = false;

  bool operator==(const ChatSegment&) const = default;
};

struct ChatOptions {
  // Thinking mode: history keeps think blocks and the prompt opens `think`.
  bool thinking = true;
  // "low", "high" or "max" (anything else is an error, even with thinking
  // off); nullopt means no thinking-effort system message (§9.2 item 2).
  std::optional<std::string> reasoning_effort = "max";
  nlohmann::json tools;            // null or array of tool declarations
  nlohmann::json tool_choice;      // null, "auto", "required", "none" or an object
  nlohmann::json response_format;  // null or {"type": "text"|"json_object"|"json_schema", ...}
  bool add_generation_prompt = true;
};

// OpenAI's reasoning levels onto the three K3's template takes (§9): each
// maps to the nearest K3 level at or above it, so asking for more thought
// never gets less: minimal and low -> low, medium and high -> high, max ->
// max; "" for anything else.
std::string k3_reasoning_level(std::string_view openai_level);
// The effort render_chat gets for a request's OpenAI level: unset -> "max"
// (K3's default, the longest thinking), a known level mapped as above, any
// other passed on for the renderer to refuse by name.
std::string k3_effort_for(const std::optional<std::string>& openai_level);

// Renders `messages` (a JSON array of message objects). Throws deltafin::Error
// naming the offending field for malformed input. Empty segments are never
// returned.
//
// Use the ordered_json overload when the request was parsed with
// nlohmann::ordered_json: tool-call arguments given as JSON objects are then
// rendered in the order the client wrote their keys (§9.3 "in the given
// order"). nlohmann::json keeps object keys sorted, so through the first
// overload such arguments come out sorted; arguments given as JSON strings
// keep their written order either way.
std::vector<ChatSegment> render_chat(const nlohmann::json& messages, const ChatOptions& options);
std::vector<ChatSegment> render_chat(const nlohmann::ordered_json& messages,
                                     const ChatOptions& options);

// The segments' texts concatenated, for display and logs.
std::string render_chat_text(const std::vector<ChatSegment>& segments);

// Tokenises one segment: for control segments the tokenizer's
// encode-with-specials, for ordinary ones its encode-ordinary.
using ChatSegmentEncoder =
    std::function<std::vector<uint32_t>(std::string_view text, bool control)>;

// Encodes every non-empty segment on its own and concatenates the ids.
std::vector<uint32_t> encode_chat(const std::vector<ChatSegment>& segments,
                                  const ChatSegmentEncoder& encode_segment);

}  // namespace deltafin
