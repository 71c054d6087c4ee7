// What `deltafin run --stats` / `--stats-json`, `serve`, `logits` and `bench`
// print about a model and a generation, formatted from the engine's data
// (engine/run_stats.h: ModelInfo, SessionInfo, RunStats). The engine formats
// no text; this file is the one place these lines are made, so the commands
// cannot drift apart.
#pragma once

#include <string>

#include "engine/run_stats.h"

namespace deltafin {

// One line: family, spine format (with the int8-row warning), where the
// experts come from, cache, lookahead, I/O engine, a mirror.
std::string describe_model(const ModelInfo& m);
// A streamed store's memory plan and any note from the reader, each a line
// ("" resident).
std::string load_report(const ModelInfo& m);
// One line: the session budget, bytes per position and fixed, and the
// context limit with what set it.
std::string session_report(const SessionInfo& s);

// One forward pass of a streamed run, one line.
std::string format_step(size_t index, const StepStats& s);
// The lines `run --stats` prints after the generated text: load, prompt,
// prefill, TTFT, per-token times, the session, speculation (with a drafter),
// and for a streamed store every step, the totals and lookahead's gates.
std::string run_stats_text(const RunStats& r);
// `run --stats-json`: the configuration, every step, the prefill's totals,
// the generated tokens, decode time and speculation's figures.
std::string run_stats_json(const RunStats& r);

}  // namespace deltafin
