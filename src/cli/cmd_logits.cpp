// deltafin logits: float32 logits [T, vocab] of every position, as .npy.
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "cli/token_list.h"
#include <algorithm>

#include "cli/model_options.h"
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
  auto m = load_model(a.model);
  CausalModel& model = m->causal();
  check_token_ids(ids, model.summary().vocab, "--tokens");
  std::unique_ptr<ModelSession> session = model.new_session();
  // --step N runs the positions N at a time (1 = token-by-token decode): the
  // logits must not change by a bit (design.md §5).
  const size_t step = a.step > 0 ? static_cast<size_t>(a.step) : ids.size();
  Rows logits(ids.size(), static_cast<size_t>(model.summary().vocab));
  for (size_t at = 0; at < ids.size(); at += step) {
    const size_t n = std::min(step, ids.size() - at);
    Rows part = model.forward(*session, std::span<const uint32_t>(ids).subspan(at, n), true);
    std::copy(part.v.begin(), part.v.end(), logits.row(at));
  }
  m->save_heat();
  write_npy_f32(a.out, {logits.T, logits.n}, logits.v.data());
  std::fprintf(stderr, "%s\n", m->describe().c_str());
  std::printf("wrote %s: float32 logits [%zu, %zu]\n", a.out.c_str(), logits.T, logits.n);
  return 0;
}
}  // namespace

Command add_logits(CLI::App& app) {
  auto a = std::make_shared<LogitsArgs>();
  CLI::App* sub = app.add_subcommand("logits", "Write the logits of every position of a token list as .npy");
  add_model_options(sub, a->model);
  sub->add_option("--tokens", a->tokens, "Comma-separated token ids, e.g. 1,2,3")->required();
  sub->add_option("--out", a->out, "Output .npy file (float32 [T, vocab])")->required();
  sub->add_option("--step", a->step, "Positions per forward pass (0 = all at once, 1 = decode one by one)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
