// What `deltafin run --stats` and `--stats-json` report about one generation,
// built inside the engine (which holds the loop's figures) so that the CLI
// sees only text: per-token times, prefill and TTFT, the session's bytes,
// how speculation went, and for a streamed store every step's I/O, the
// totals and route lookahead's gates.
#pragma once

#include <string>

#include "engine/generate.h"
#include "engine/loaded_model.h"
#include "engine/run_stats.h"
#include "speculative/speculative_generate.h"

namespace deltafin {

struct RunReportInput {
  LoadedModel& model;
  const GenerateStats& generate;
  const SpecStats& spec;
  const std::string& drafter;  // "none" for plain decoding
  const RunStatsCollector& collector;
  uint64_t session_bytes = 0;
  int64_t session_length = 0;
};

// The lines `run --stats` prints after the generated text.
std::string run_report_text(const RunReportInput& in);
// `run --stats-json`: the collector's steps and configuration, the generated
// tokens, decode time and speculation's figures.
std::string run_report_json(const RunReportInput& in);

}  // namespace deltafin
