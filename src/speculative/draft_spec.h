// Which drafter speculative decoding uses, as data: the kind, and the
// checkpoints the drafters may be read from. model/loaders/drafter_factory.h
// parses `--draft` strings into it (parse_draft_spec) and turns it into a
// drafter per request. A family's own words (K3's DSpark) stay there: a
// "head" is a drafter trained on the target's hidden states, read with the
// target (K3's DSpark), a "draft model" a small model of its own with its own
// tokenizer (a Qwen3 checkpoint).
#pragma once

#include <string>

namespace deltafin {

struct DraftSpec {
  enum class Kind {
    Auto,    // the best available per request: a chat by the head, a completion by the draft model (else the head), else n-gram
    None,    // plain decoding
    Ngram,   // prompt lookup (speculative/ngram_drafter.h)
    Replay,  // benchmarks' oracle: replays replay_file's ids after the prompt
    Head,    // the head in head_dir
    Model,   // the draft model in model_dir
  };
  Kind kind = Kind::Auto;
  std::string head_dir;     // Head's checkpoint; for Auto, what chats may use
  std::string model_dir;    // Model's checkpoint; for Auto, what completions may use
  std::string replay_file;  // Replay: a previous run's --tokens-out
};

}  // namespace deltafin
