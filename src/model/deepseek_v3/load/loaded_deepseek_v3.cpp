#include "model/deepseek_v3/load/loaded_deepseek_v3.h"

#include <chrono>

#include "format/checkpoint.h"
#include "load/family_loading.h"
#include "model/deepseek_v3/family_checkpoint.h"
#include "model/deepseek_v3/weights.h"
#include "model/registry.h"
#include "store/spine_file.h"
#include "util/error.h"

namespace deltafin {

namespace {

// DeepSeek releases a Hugging Face tokenizer.json, Kimi K2 a tiktoken.model
// (chat_format.h reads either, with the flavour's chat format). Neither may
// have more ids than the embedding has rows.
void load_tokenizer(LoadedDeepseekV3& m, const std::string& dir) {
  m.tokenizer = load_deepseek_v3_tokenizer(dir);
  if (static_cast<int64_t>(m.tokenizer->vocab_size()) > m.config.vocab_size)
    fail(dir, ": the tokenizer has ", m.tokenizer->vocab_size(), " ids, more than config.json's vocab_size ",
         m.config.vocab_size);
  m.text = m.tokenizer->hf ? token_text(*m.tokenizer->hf) : token_text(*m.tokenizer->tiktoken);
  for (int64_t id : m.config.eos_token_ids) m.eos.push_back(static_cast<uint32_t>(id));
  // The spine is the release's own bytes: FP8 with block scales, or BF16.
  m.spine_format = m.config.quant == DsQuant::Fp8Block ? "fp8" : "bf16";
}

}  // namespace

std::unique_ptr<LoadedDeepseekV3> load_deepseek_v3_resident(const std::string& dir, int threads, const BackendChoice& backend) {
  check_threads(threads);
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<LoadedDeepseekV3>();
  m->family = &family_info(Family::DeepseekV3);
  m->config = read_deepseek_v3_config(dir + "/config.json");
  const Checkpoint checkpoint = Checkpoint::open(dir);
  m->weights = load_deepseek_v3_weights(m->config, checkpoint);
  m->experts = load_resident_deepseek_v3_experts(m->config, checkpoint);
  load_tokenizer(*m, dir);
  m->pool = std::make_unique<ThreadPool>(threads);
  m->backend = make_backend(backend, m->pool.get());
  m->model = std::make_unique<DeepseekV3Model>(m->config, m->weights, *m->experts, *m->backend);
  m->fingerprint = checkpoint_fingerprint(dir);
  m->load_seconds = seconds_since(t0);
  return m;
}

std::unique_ptr<LoadedDeepseekV3> load_deepseek_v3_store(const std::string& store_dir, const EngineOptions& o) {
  check_threads(o.threads);
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<LoadedDeepseekV3>();
  m->family = &family_info(Family::DeepseekV3);
  open_store_manifest(*m, store_dir);
  const StoreManifest& man = *m->manifest;
  m->config = read_deepseek_v3_config(store_dir + "/config.json");
  const DeepseekV3Config& c = m->config;
  if (c.num_hidden_layers != man.layers || c.n_routed_experts != man.experts || c.moe_layers() != man.moe_layers ||
      c.expert_record_bytes() != man.expert_bytes)
    fail(store_dir, "/store.json: ", man.layers, " layers (", man.moe_layers.size(), " MoE) x ", man.experts,
         " experts of ", man.expert_bytes, " bytes, but config.json describes ", c.num_hidden_layers, " (",
         c.moe_layers().size(), ") x ", c.n_routed_experts, " of ", c.expert_record_bytes());
  if (man.spine_format != SpineFormat::BF16)
    fail(store_dir, "/store.json: a DeepSeek-V3-family spine is kept as released, not ", spine_format_name(man.spine_format));
  if (o.lookahead == LookaheadMode::On)
    fail("--lookahead on: route lookahead is K3's (PILOT predictors); the DeepSeek-V3 family runs without it");
  load_tokenizer(*m, store_dir);

  const uint64_t moe_experts = man.moe_layers.size() * static_cast<uint64_t>(man.experts);
  m->memory = plan_memory(man.spine_bytes, man.expert_bytes, moe_experts, c.num_experts_per_tok, o.cache_gb, o.pin_gb,
                          false);
  auto spine = open_store_spine(store_dir, man);
  m->weights = load_deepseek_v3_weights(c, *spine);
  spine.reset();

  open_streaming_experts(*m, o, c.num_experts_per_tok, false, mirror_fetch_options(man, man.record, o));
  m->pool = std::make_unique<ThreadPool>(o.threads);
  m->backend = make_backend(o.backend, m->pool.get());
  m->model = std::make_unique<DeepseekV3Model>(m->config, m->weights, *m->experts, *m->backend);
  m->load_seconds = seconds_since(t0);
  return m;
}

}  // namespace deltafin
