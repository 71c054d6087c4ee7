#include "engine/loaded_model.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>

#include "model/kimi_k3/family_checkpoint.h"
#include "remote/prefetch_experts.h"
#include "store/spine_file.h"
#include "util/error.h"
#include "util/file.h"
#include "util/sha256.h"
#include "util/progress.h"

namespace deltafin {

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

void LoadedModel::save_heat() {
  if (heat && !store_dir.empty()) heat->save(store_dir);
}

std::string LoadedModel::describe() const {
  std::ostringstream o;
  o << (family ? family->name : "?") << "; spine " << spine_format;
  if (spine_format != "bf16") o << " (NOT weight-exact: int8-row spine)";
  if (!stream) {
    o << "; experts resident";
  } else {
    o << "; experts streamed from " << manifest->drives.size() << " drive(s), cache "
      << human_bytes(static_cast<double>(memory.cache_bytes())) << ", lookahead "
      << lookahead_mode_name(route_lookahead() ? route_lookahead()->mode() : LookaheadMode::Off) << ", io "
      << io_engine_name(stream->reader().engine());
    if (const ExpertFetcher* f = stream->fetcher()) {
      o << "; missing experts fetched from " << f->url() << " (" << f->local_experts() << " on the drives";
      if (f->disk_budget_bytes()) o << ", disk budget " << human_bytes(static_cast<double>(f->disk_budget_bytes()));
      o << ")";
    }
  }
  return o.str();
}

namespace {

std::string checkpoint_fingerprint(const std::string& dir) {
  std::string id = "hf-checkpoint\n" + read_text_file(dir + "/config.json") + "\n";
  if (file_exists(dir + "/model.safetensors.index.json")) id += read_text_file(dir + "/model.safetensors.index.json");
  std::vector<std::string> shards;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") shards.push_back(cat(e.path().filename().string(), " ", e.file_size()));
  std::sort(shards.begin(), shards.end());
  for (const std::string& s : shards) id += "\n" + s;
  return to_hex(sha256(id.data(), id.size()));
}

std::string store_fingerprint(const std::string& dir) {
  const std::string id = "store\n" + read_text_file(dir + "/config.json") + "\n" + read_text_file(dir + "/store.json");
  return to_hex(sha256(id.data(), id.size()));
}

// What every store run opens once its manifest and memory plan are set: the
// heat histogram, the monitor (and trace) and the streaming expert source
// with its cache, warmed with the pinned experts; `fetch` for a store whose
// experts come from a mirror.
void open_streaming_experts(LoadedModel& m, const EngineOptions& o, int64_t experts_per_token, bool gate_by_idle,
                            const std::optional<FetchOptions>& fetch) {
  const StoreManifest& man = *m.manifest;
  m.heat = std::make_unique<HeatHistogram>(HeatHistogram::load(m.store_dir, man.layers, man.experts));
  m.monitor = std::make_unique<Monitor>(man.drives.size());
  if (!o.trace.empty()) m.monitor->open_trace(o.trace);
  StreamOptions so;
  so.cache_slots = m.memory.cache_slots;
  so.pinned_slots = m.memory.pinned_slots;
  so.reader = o.reader;
  so.gate_prefetch_by_idle = gate_by_idle;
  if (fetch) {
    so.store_dir = m.store_dir;
    so.fetch = *fetch;
  }
  auto source = std::make_unique<StreamingExpertSource>(man, so, m.heat.get(), m.monitor.get(), experts_per_token);
  m.stream = source.get();
  m.experts = std::move(source);
  m.stream->warm_pinned();
}

// How a streamed store's missing experts are fetched from its mirror (none
// for a store whose experts are all local). The fetched bytes are checked
// against the record's MXFP4 structure where it has MXFP4 matrices.
std::optional<FetchOptions> mirror_fetch_options(const StoreManifest& man, const std::vector<RecordPart>& record,
                                                 const EngineOptions& o) {
  if (!man.remote) return std::nullopt;
  FetchOptions fo;
  fo.threads = o.fetch_threads;
  fo.matrices = mxfp4_matrices(record);
  if (o.disk_budget_gb) {
    if (!(*o.disk_budget_gb >= 0)) fail("--disk-budget: ", *o.disk_budget_gb, " (must be >= 0 GB)");
    fo.disk_budget_bytes = static_cast<uint64_t>(*o.disk_budget_gb * 1e9);
  }
  return fo;
}

// Qwen3's chat format when the tokenizer has its chat tokens (a base model's
// may lack <think>): chat requests are then refused, saying which is missing.
void attach_qwen3_chat(LoadedQwen3Moe& m) {
  m.chat_format = make_qwen3_chat_format(*m.tokenizer, *m.text, m.tokenizer_json, &m.no_chat);
}

}  // namespace

std::unique_ptr<LoadedK3> load_k3_resident(const std::string& dir, int threads) {
  if (threads < 1) fail("--threads must be at least 1, got ", threads);
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
  m->model = std::make_unique<K3Model>(m->config, m->weights, *m->experts, m->pool.get());
  m->fingerprint = checkpoint_fingerprint(dir);
  m->load_seconds = since(t0);
  return m;
}

std::unique_ptr<LoadedK3> load_k3_store(const std::string& store_dir, const EngineOptions& o) {
  if (o.threads < 1) fail("--threads must be at least 1, got ", o.threads);
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<LoadedK3>();
  m->family = &family_info(Family::KimiK3);
  m->store_dir = store_dir;
  m->manifest = std::make_unique<StoreManifest>(load_store_manifest(store_dir));
  const StoreManifest& man = *m->manifest;
  if (man.family != "kimi_k3") fail(store_dir, "/store.json: a ", man.family, " store, not a Kimi K3 one");
  m->config = load_k3_config(store_dir + "/config.json");
  const K3Config& c = m->config;
  if (c.num_hidden_layers != man.layers || c.num_experts != man.experts)
    fail(store_dir, "/store.json: ", man.layers, " layers x ", man.experts, " experts, but config.json says ",
         c.num_hidden_layers, " x ", c.num_experts);
  m->spine_format = spine_format_name(man.spine_format);
  m->fingerprint = store_fingerprint(store_dir);
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
  m->model = std::make_unique<K3Model>(m->config, m->weights, *m->experts, m->pool.get());
  if (o.lookahead != LookaheadMode::Off) {
    m->lookahead = std::make_unique<RouteLookahead>(m->config, m->weights, o.lookahead, m->pool.get());
    m->model->set_lookahead(m->lookahead.get());
  }
  m->load_seconds = since(t0);
  return m;
}

std::unique_ptr<LoadedQwen3Moe> load_qwen3_moe_resident(const std::string& dir, int threads) {
  if (threads < 1) fail("--threads must be at least 1, got ", threads);
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
  m->model = std::make_unique<Qwen3MoeModel>(m->config, m->weights, *m->experts, m->pool.get());
  m->fingerprint = checkpoint_fingerprint(dir);
  m->load_seconds = since(t0);
  return m;
}

std::unique_ptr<LoadedModel> load_resident(const std::string& dir, int threads) {
  const FamilyInfo& f = detect_checkpoint_family(dir);
  switch (f.family) {
    case Family::KimiK3: return load_k3_resident(dir, threads);
    case Family::Qwen3Moe: return load_qwen3_moe_resident(dir, threads);
    default: fail(dir, ": a ", f.what, " checkpoint is a draft model, not a target (--draft model:DIR or dspark:DIR)");
  }
}

LoadedK3& require_k3(LoadedModel& m, const std::string& what) {
  auto* k3 = dynamic_cast<LoadedK3*>(&m);
  if (!k3) fail(what, " is not available for ", m.family ? m.family->what : "this", " models yet (only Kimi K3)");
  return *k3;
}

std::unique_ptr<LoadedQwen3Moe> load_qwen3_moe_store(const std::string& store_dir, const EngineOptions& o) {
  if (o.threads < 1) fail("--threads must be at least 1, got ", o.threads);
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<LoadedQwen3Moe>();
  m->family = &family_info(Family::Qwen3Moe);
  m->store_dir = store_dir;
  m->manifest = std::make_unique<StoreManifest>(load_store_manifest(store_dir));
  const StoreManifest& man = *m->manifest;
  if (man.family != "qwen3_moe") fail(store_dir, "/store.json: a ", man.family, " store, not a Qwen3-MoE one");
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
  m->fingerprint = store_fingerprint(store_dir);
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
  m->model = std::make_unique<Qwen3MoeModel>(m->config, m->weights, *m->experts, m->pool.get());
  m->load_seconds = since(t0);
  return m;
}

std::unique_ptr<LoadedModel> load_store(const std::string& store_dir, const EngineOptions& o) {
  const std::string family = load_store_manifest(store_dir).family;
  if (family == "kimi_k3") return load_k3_store(store_dir, o);
  if (family == "qwen3_moe") return load_qwen3_moe_store(store_dir, o);
  fail(store_dir, "/store.json: family \"", family, "\" is not one this build runs");
}

}  // namespace deltafin
