#include "model/kimi_k3/load/loaded_k3.h"

#include <chrono>

#include "load/family_loading.h"
#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/family_checkpoint.h"
#include "model/registry.h"
#include "store/spine_file.h"
#include "util/error.h"

namespace deltafin {

std::unique_ptr<LoadedK3> load_k3_resident(const std::string& dir, int threads, const BackendChoice& backend) {
  check_threads(threads);
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<LoadedK3>();
  m->family = &family_info(Family::KimiK3);
  K3Checkpoint checkpoint = load_k3_checkpoint(dir);
  m->config = checkpoint.config;
  m->weights = load_k3_weights(checkpoint);
  m->experts = load_resident_k3_experts(checkpoint);
  // load_k3_checkpoint has checked vocab_size == tiktoken ranks + 256, the tokenizer's size.
  m->tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(dir));
  m->text = token_text(*m->tokenizer);
  m->eos = {m->tokenizer->eos_id()};
  m->chat_format = std::make_unique<K3ChatFormat>(*m->tokenizer);
  m->pool = std::make_unique<ThreadPool>(threads);
  m->backend = make_backend(backend, m->pool.get());
  m->model = std::make_unique<K3Model>(m->config, m->weights, *m->experts, *m->backend);
  m->fingerprint = checkpoint_fingerprint(dir);
  m->load_seconds = seconds_since(t0);
  return m;
}

std::unique_ptr<LoadedK3> load_k3_store(const std::string& store_dir, const EngineOptions& o) {
  check_threads(o.threads);
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<LoadedK3>();
  m->family = &family_info(Family::KimiK3);
  open_store_manifest(*m, store_dir);
  const StoreManifest& man = *m->manifest;
  m->config = load_k3_config(store_dir + "/config.json");
  const K3Config& c = m->config;
  if (c.num_hidden_layers != man.layers || c.num_experts != man.experts)
    fail(store_dir, "/store.json: ", man.layers, " layers x ", man.experts, " experts, but config.json says ",
         c.num_hidden_layers, " x ", c.num_experts);
  m->spine_format = spine_format_name(man.spine_format);
  m->tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(store_dir));
  m->text = token_text(*m->tokenizer);
  m->eos = {m->tokenizer->eos_id()};
  m->chat_format = std::make_unique<K3ChatFormat>(*m->tokenizer);
  if (static_cast<int64_t>(m->tokenizer->vocab_size()) != c.vocab_size)
    fail(store_dir, ": the tokenizer has ", m->tokenizer->vocab_size(), " ids but config.json's vocab_size is ", c.vocab_size);

  uint64_t moe_experts = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) moe_experts += c.is_moe_layer(l) ? c.num_experts : 0;
  // The spine in RAM: the stored tensors and what is derived from them at load.
  const uint64_t spine_ram = man.spine_bytes + k3_derived_weight_bytes(c, man.spine_format == SpineFormat::Int8Row);
  m->memory = plan_memory(spine_ram, man.expert_bytes, moe_experts, c.num_experts_per_token, o.cache_gb,
                          o.pin_gb, o.lookahead != LookaheadMode::Off);

  auto spine = open_store_spine(store_dir, man);
  m->weights = load_k3_weights(c, *spine);
  spine.reset();

  // Stores before manifest version 4 did not record the layout: K3's.
  const std::optional<FetchOptions> fetch = mirror_fetch_options(man, man.record.empty() ? k3_record_layout(c) : man.record, o);
  open_streaming_experts(*m, o, c.num_experts_per_token, o.lookahead == LookaheadMode::Auto, fetch);
  m->pool = std::make_unique<ThreadPool>(o.threads);
  m->backend = make_backend(o.backend, m->pool.get());
  m->model = std::make_unique<K3Model>(m->config, m->weights, *m->experts, *m->backend);
  if (o.lookahead != LookaheadMode::Off) {
    m->lookahead = std::make_unique<RouteLookahead>(m->config, m->weights, o.lookahead, m->pool.get());
    m->model->set_lookahead(m->lookahead.get());
  }
  m->load_seconds = seconds_since(t0);
  return m;
}

LoadedK3& require_k3(LoadedModel& m, const std::string& what) {
  auto* k3 = dynamic_cast<LoadedK3*>(&m);
  if (!k3) fail(what, " is not available for ", m.family ? m.family->what : "this", " models (only Kimi K3 has it)");
  return *k3;
}

}  // namespace deltafin
