// deltafin logits: float32 logits [T, vocab] of every position, as .npy.
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "engine/loaded_model.h"
#include "format/npy.h"
#include "util/error.h"

namespace deltafin::cli {

namespace {
struct LogitsArgs {
  std::string model, tokens, out;
  int threads = 1;
};

std::vector<uint32_t> parse_token_list(const std::string& s) {
  std::vector<uint32_t> ids;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    unsigned long v = 0;
    try {
      v = std::stoul(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v > 0xffffffffUL)
      fail("--tokens: '", item, "' is not a token id (expected comma-separated non-negative integers)");
    ids.push_back(static_cast<uint32_t>(v));
  }
  if (ids.empty()) fail("--tokens: no token ids given");
  return ids;
}

int run(const LogitsArgs& a) {
  std::vector<uint32_t> ids = parse_token_list(a.tokens);
  auto m = load_k3_resident(a.model, a.threads);
  for (uint32_t id : ids)
    if (id >= m->checkpoint.config.vocab_size)
      fail("--tokens: id ", id, " is outside the vocabulary of ", m->checkpoint.config.vocab_size);
  K3Session session(m->checkpoint.config);
  Rows logits = m->model->forward(session, ids, true);
  write_npy_f32(a.out, {logits.T, logits.n}, logits.v.data());
  std::printf("wrote %s: float32 logits [%zu, %zu]\n", a.out.c_str(), logits.T, logits.n);
  return 0;
}
}  // namespace

Command add_logits(CLI::App& app) {
  auto a = std::make_shared<LogitsArgs>();
  CLI::App* sub = app.add_subcommand("logits", "Write the logits of every position of a token list as .npy");
  sub->add_option("--model", a->model, "Hugging Face checkpoint directory")->required();
  sub->add_option("--tokens", a->tokens, "Comma-separated token ids, e.g. 1,2,3")->required();
  sub->add_option("--out", a->out, "Output .npy file (float32 [T, vocab])")->required();
  sub->add_option("--threads", a->threads, "Worker threads")->capture_default_str();
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
