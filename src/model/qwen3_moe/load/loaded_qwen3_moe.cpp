#include "model/qwen3_moe/load/loaded_qwen3_moe.h"

#include <chrono>

#include "load/family_loading.h"
#include "format/checkpoint.h"
#include "model/qwen3_moe/qwen3_moe_weights.h"
#include "model/registry.h"
#include "store/spine_file.h"
#include "util/error.h"

namespace deltafin {

namespace {

// Qwen3's chat format when the tokenizer has its chat tokens (a base model's
// may lack <think>): chat requests are then refused, saying which is missing.
void attach_qwen3_chat(LoadedQwen3Moe& m) {
  m.chat_format = make_qwen3_chat_format(*m.tokenizer, *m.text, m.tokenizer_json, &m.no_chat);
}

}  // namespace

std::unique_ptr<LoadedQwen3Moe> load_qwen3_moe_resident(const std::string& dir, int threads, const BackendChoice& backend) {
  check_threads(threads);
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<LoadedQwen3Moe>();
  m->family = &family_info(Family::Qwen3Moe);
  m->config = read_qwen3_moe_config(dir + "/config.json");
  const Checkpoint checkpoint = Checkpoint::open(dir);
  m->weights = load_qwen3_moe_weights(m->config, checkpoint);
  m->experts = load_resident_qwen3_moe_experts(m->config, checkpoint);
  m->tokenizer_json = dir + "/tokenizer.json";
  m->tokenizer = std::make_unique<HfTokenizer>(HfTokenizer::load(m->tokenizer_json));
  // The embedding may have more rows than the tokenizer has ids (Qwen pads
  // vocab_size); fewer would leave ids the tokenizer makes without a row.
  if (m->tokenizer->vocab_size() > static_cast<size_t>(m->config.base.vocab_size))
    fail(dir, "/tokenizer.json: ", m->tokenizer->vocab_size(), " ids, more than config.json's vocab_size ",
         m->config.base.vocab_size);
  m->text = token_text(*m->tokenizer);
  for (int64_t id : m->config.base.eos_token_ids) m->eos.push_back(static_cast<uint32_t>(id));
  attach_qwen3_chat(*m);
  m->pool = std::make_unique<ThreadPool>(threads);
  m->backend = make_backend(backend, m->pool.get());
  m->model = std::make_unique<Qwen3MoeModel>(m->config, m->weights, *m->experts, *m->backend);
  m->fingerprint = checkpoint_fingerprint(dir);
  m->load_seconds = seconds_since(t0);
  return m;
}

std::unique_ptr<LoadedQwen3Moe> load_qwen3_moe_store(const std::string& store_dir, const EngineOptions& o) {
  check_threads(o.threads);
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<LoadedQwen3Moe>();
  m->family = &family_info(Family::Qwen3Moe);
  open_store_manifest(*m, store_dir);
  const StoreManifest& man = *m->manifest;
  m->config = read_qwen3_moe_config(store_dir + "/config.json");
  const Qwen3MoeConfig& c = m->config;
  if (c.base.num_hidden_layers != man.layers || c.num_experts != man.experts || c.moe_layers() != man.moe_layers ||
      c.expert_record_bytes() != man.expert_bytes)
    fail(store_dir, "/store.json: ", man.layers, " layers (", man.moe_layers.size(), " MoE) x ", man.experts,
         " experts of ", man.expert_bytes, " bytes, but config.json describes ", c.base.num_hidden_layers, " (",
         c.moe_layers().size(), ") x ", c.num_experts, " of ", c.expert_record_bytes());
  if (man.spine_format != SpineFormat::BF16) fail(store_dir, "/store.json: a Qwen3-MoE spine is BF16, not ", spine_format_name(man.spine_format));
  if (o.lookahead == LookaheadMode::On)
    fail("--lookahead on: route lookahead is K3's (PILOT predictors); Qwen3-MoE runs without it");
  m->tokenizer_json = store_dir + "/tokenizer.json";
  m->tokenizer = std::make_unique<HfTokenizer>(HfTokenizer::load(m->tokenizer_json));
  if (m->tokenizer->vocab_size() > static_cast<size_t>(c.base.vocab_size))
    fail(store_dir, "/tokenizer.json: ", m->tokenizer->vocab_size(), " ids, more than config.json's vocab_size ",
         c.base.vocab_size);
  m->text = token_text(*m->tokenizer);
  for (int64_t id : c.base.eos_token_ids) m->eos.push_back(static_cast<uint32_t>(id));
  attach_qwen3_chat(*m);

  const uint64_t moe_experts = man.moe_layers.size() * static_cast<uint64_t>(man.experts);
  m->memory = plan_memory(man.spine_bytes, man.expert_bytes, moe_experts, c.num_experts_per_tok, o.cache_gb, o.pin_gb,
                          false);
  auto spine = open_store_spine(store_dir, man);
  m->weights = load_qwen3_moe_weights(c, *spine);
  spine.reset();

  open_streaming_experts(*m, o, c.num_experts_per_tok, false, mirror_fetch_options(man, man.record, o));
  m->pool = std::make_unique<ThreadPool>(o.threads);
  m->backend = make_backend(o.backend, m->pool.get());
  m->model = std::make_unique<Qwen3MoeModel>(m->config, m->weights, *m->experts, *m->backend);
  m->load_seconds = seconds_since(t0);
  return m;
}

}  // namespace deltafin
