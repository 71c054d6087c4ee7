#include "engine/loaded_model.h"

#include <chrono>

#include "util/error.h"

namespace deltafin {

std::unique_ptr<LoadedK3> load_k3_resident(const std::string& dir, int threads) {
  if (threads < 1) fail("--threads must be at least 1, got ", threads);
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<LoadedK3>();
  m->checkpoint = load_k3_checkpoint(dir);
  m->weights = load_k3_weights(m->checkpoint);
  m->experts = std::make_unique<ResidentExpertSource>(m->checkpoint);
  // load_k3_checkpoint has checked vocab_size == tiktoken ranks + 256, the tokenizer's size.
  m->tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(dir));
  m->pool = std::make_unique<ThreadPool>(threads);
  m->model = std::make_unique<K3Model>(m->checkpoint.config, m->weights, *m->experts, m->pool.get());
  m->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

}  // namespace deltafin
