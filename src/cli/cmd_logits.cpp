// deltafin logits: float32 logits [T, vocab] of every position, as .npy.
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "cli/token_list.h"
#include "cli/model_options.h"
#include "bench/run_report.h"
#include "engine/engine.h"
#include "format/npy.h"
#include "util/error.h"

namespace deltafin::cli {

namespace {
struct LogitsArgs {
  ModelArgs model;
  std::string tokens, out;
  int64_t step = 0;
};

int run(const LogitsArgs& a) {
  std::vector<uint32_t> ids = parse_token_list(a.tokens, "--tokens");
  EngineSettings so;
  so.prompt_cache_entries = 0;
  so.prompt_cache_bytes = 0;
  so.draft.kind = DraftSpec::Kind::None;
  Engine engine(model_source(a.model), so, nullptr);
  check_token_ids(ids, engine.vocab(), "--tokens");
  // --step N runs the positions N at a time (1 = token-by-token decode): the
  // logits must not change by a bit (design.md §5).
  const std::vector<float> logits = engine.logits(ids, static_cast<size_t>(a.step));
  engine.save_heat();
  const size_t vocab = engine.vocab();
  write_npy_f32(a.out, {ids.size(), vocab}, logits.data());
  std::fprintf(stderr, "%s\n", describe_model(engine.model_info()).c_str());
  std::printf("wrote %s: float32 logits [%zu, %zu]\n", a.out.c_str(), ids.size(), vocab);
  return 0;
}
}  // namespace

Command add_logits(CLI::App& app) {
  auto a = std::make_shared<LogitsArgs>();
  CLI::App* sub = app.add_subcommand("logits", "Write the logits of every position of a token list as .npy");
  sub->footer(R"(Writes float32 logits [T, vocab] of every position as NumPy .npy (format 1.0). --step N runs N
positions per pass (1 = decode one by one): the file must not change by a bit. Nor does it change between
--model and a store of the same checkpoint (BF16 spine), with the thread count or with the ISA: cmp two
files to check it.)");
  add_model_options(sub, a->model);
  sub->add_option("--tokens", a->tokens, "Comma-separated token ids, e.g. 1,2,3")->required();
  sub->add_option("--out", a->out, "Output .npy file: float32 [T, vocab]")->required();
  sub->add_option("--step", a->step, "Positions per forward pass; 0 = all at once, 1 = decode one by one")
      ->transform(whole_number(0, kMaxTokens))
      ->capture_default_str();
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
