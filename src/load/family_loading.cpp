#include "load/family_loading.h"

#include <algorithm>
#include <filesystem>

#include "remote/prefetch_experts.h"
#include "util/error.h"
#include "util/file.h"
#include "util/sha256.h"

namespace deltafin {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_threads(int threads) {
  if (threads < 1) fail("--threads must be at least 1, got ", threads);
}

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

ReaderOptions reader_options(const ReadSettings& s) {
  ReaderOptions r;
  try {
    r.engine = parse_io_engine(s.io);
  } catch (const Error& e) {
    fail("--io: ", e.what());
  }
  r.queue_depth = s.queue_depth;
  r.prefetch_depth = s.prefetch_depth;
  r.chunk_bytes = s.chunk_bytes;
  r.prefetch_max_wait_s = s.prefetch_max_wait_s;
  r.direct = s.direct;
  r.verify_threads = s.verify_threads;
  return r;
}

void open_streaming_experts(LoadedModel& m, const EngineOptions& o, int64_t experts_per_token, bool gate_by_idle,
                            const std::optional<FetchOptions>& fetch) {
  const StoreManifest& man = *m.manifest;
  m.heat = std::make_unique<HeatHistogram>(HeatHistogram::load(m.store_dir, man.layers, man.experts));
  m.monitor = std::make_unique<Monitor>(man.drives.size());
  if (!o.trace.empty()) m.monitor->open_trace(o.trace);
  StreamOptions so;
  so.cache_slots = m.memory.cache_slots;
  so.pinned_slots = m.memory.pinned_slots;
  if (o.cache_policy == "auto") {
    const AutoPolicyChoice c = choose_cache_policy(m.heat.get(), experts_per_token, man.experts);
    so.cache_policy = c.kind;
    m.cache_policy_why = "auto: " + c.why;
  } else {
    so.cache_policy = parse_cache_policy(o.cache_policy, "--cache-policy");
  }
  so.reader = reader_options(o.reader);
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

void open_store_manifest(LoadedModel& m, const std::string& store_dir) {
  m.store_dir = store_dir;
  m.manifest = std::make_unique<StoreManifest>(load_store_manifest(store_dir));
  if (m.manifest->family != m.family->name)
    fail(store_dir, "/store.json: a ", m.manifest->family, " store, not a ", m.family->name, " one");
  m.fingerprint = store_fingerprint(store_dir);
}

}  // namespace deltafin
