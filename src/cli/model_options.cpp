#include "cli/model_options.h"

#include <cstdlib>

#include "cli/commands.h"

#include "model/loaders/family_loaders.h"
#include "engine/engine.h"
#include "experts/cache_policy.h"
#include "io/expert_reader.h"
#include "util/error.h"

namespace deltafin::cli {

void add_model_options(CLI::App* sub, ModelArgs& a) {
  auto* model = sub->add_option("--model", a.model, "Hugging Face checkpoint directory (all weights resident)");
  auto* store = sub->add_option("--store", a.store, "deltafin store directory (experts streamed from its drives)");
  model->excludes(store);
  sub->add_option("--threads", a.threads, "Worker threads")->transform(whole_number(1, kMaxThreads))->capture_default_str();
  sub->add_option("--backend", a.backend.kind,
                  "What computes: cpu, or vulkan (a GPU, or lavapipe on the CPU; `deltafin devices` lists them); the "
                  "same bits either way. Default: DELTAFIN_BACKEND, else cpu")
      ->check(one_of({"cpu", "vulkan"}));
  sub->add_option("--device", a.backend.device,
                  "Vulkan: the device's index or part of its name (default: DELTAFIN_DEVICE, else the first GPU)");
  sub->add_option("--device-memory", a.backend.device_memory_gb,
                  "Vulkan: GB of device memory the spine may take; the rest is read from RAM per use (0 = 90% of it)")
      ->check(number(0));
  sub->add_option("--cache-gb", a.cache_gb, "Store: GB of RAM for the expert cache; default 70% of the free RAM the spine leaves")
      ->check(number(0));
  sub->add_option("--pin-gb", a.pin_gb, "Store: GB of RAM pinned to the hottest experts of the heat histogram")
      ->check(number(0))
      ->capture_default_str();
  sub->add_option("--cache-policy", a.cache_policy,
                  "Store: the expert cache's eviction policy; auto (the default) takes cycle-reuse once the store's "
                  "heat has measured decoded tokens reusing at least 2.2x chance of the previous token's experts, "
                  "else cycle-heat (docs/design.md 4.1; cache-sim compares them on a route trace)")
      ->check(one_of(cache_policy_options()));
  sub->add_option("--lookahead", a.lookahead,
                  "Store: route-lookahead prefetch; auto runs it per layer, only while recall pays and only for as "
                  "many predictions as the drives can read while otherwise idle")
      ->check(one_of({"on", "off", "auto"}))
      ->capture_default_str();
  sub->add_option("--io", a.io, "Store: I/O engine")->check(one_of({"uring", "pread"}))->capture_default_str();
  sub->add_option("--queue-depth", a.queue_depth, "Store: reads in flight per drive")->transform(whole_number(1, 256))->capture_default_str();
  sub->add_option("--prefetch-depth", a.prefetch_depth, "Store: of those, at most this many prefetch reads")
      ->transform(whole_number(1, 256))
      ->capture_default_str();
  sub->add_option("--chunk-mb", a.chunk_mb, "Store: read size in MB, rounded to 4 KiB")->check(number(0.004096, 1024))->capture_default_str();
  sub->add_flag("--buffered", a.buffered, "Store: buffered reads instead of O_DIRECT, for file systems that refuse it");
  sub->add_option("--trace", a.trace, "Store: write every expert read and hit as JSON lines to this file");
  sub->add_option("--route-trace", a.route_trace,
                  "Write every position's route of every MoE layer to this file, as text (for cache studies: "
                  "cache-sim); resident or store");
  sub->add_option("--fetch-threads", a.fetch_threads, "Streamed store: parallel downloads from the mirror")
      ->transform(whole_number(1, 64))
      ->capture_default_str();
  sub->add_option("--disk-budget", a.disk_budget_gb,
                  "Streamed store: GB of the drives fetched experts may take, overriding setup's; 0 = no limit")
      ->check(number(0));
}

ModelSource model_source(const ModelArgs& a) {
  if (a.model.empty() == a.store.empty()) fail("give exactly one of --model (checkpoint) or --store (deltafin store)");
  ModelSource s;
  s.checkpoint = a.model;
  s.store = a.store;
  EngineOptions& o = s.options;
  o.threads = a.threads;
  o.route_trace = a.route_trace;
  o.backend = a.backend;
  if (o.backend.kind_from_env && o.backend.kind != backend_choice_from_env().kind) o.backend.kind_from_env = false;
  if (a.backend.kind != "vulkan" && (!a.backend.device.empty() && !std::getenv("DELTAFIN_DEVICE")))
    fail("--device names a Vulkan device: give --backend vulkan with it");
  if (!a.model.empty()) {
    if (a.cache_gb || a.pin_gb != 0 || !a.trace.empty() || !a.cache_policy.empty())
      fail("--cache-gb, --pin-gb, --cache-policy and --trace apply to --store runs (with --model every expert is "
           "resident)");
    return s;
  }
  o.cache_gb = a.cache_gb;
  o.pin_gb = a.pin_gb;
  if (!a.cache_policy.empty()) o.cache_policy = a.cache_policy;
  o.lookahead = parse_lookahead_mode(a.lookahead);
  o.reader.io = io_engine_name(parse_io_engine(a.io));  // checked before the model loads
  o.reader.queue_depth = a.queue_depth;
  o.reader.prefetch_depth = std::min(a.prefetch_depth, a.queue_depth);
  o.reader.chunk_bytes = std::max<uint64_t>(4096, static_cast<uint64_t>(a.chunk_mb * 1e6) / 4096 * 4096);
  o.reader.direct = !a.buffered;
  o.trace = a.trace;
  o.fetch_threads = a.fetch_threads;
  o.disk_budget_gb = a.disk_budget_gb;
  return s;
}

std::unique_ptr<LoadedModel> load_model(const ModelArgs& a) { return deltafin::load_model(model_source(a)); }

std::string PromptCacheArgs::dir_for(const ModelArgs& m) const {
  if (disk_gb <= 0) return "";
  if (!dir.empty()) return dir;
  return m.store.empty() ? "" : m.store + "/prompt-cache";
}

void add_prompt_cache_options(CLI::App* sub, PromptCacheArgs& a) {
  sub->add_option("--prompt-cache-dir", a.dir,
                  "Keep prompt states on disk here and reuse them for prompts that share a prefix, also after a "
                  "restart; default STORE/prompt-cache with --store, none with --model");
  sub->add_option("--prompt-cache-disk-gb", a.disk_gb, "GB of disk for the kept prompt states; 0 = none")
      ->check(number(0))
      ->capture_default_str();
}

void SessionArgs::apply(EngineSettings& so) const {
  so.context_limit = context;
  so.session_budget_bytes = static_cast<uint64_t>(session_budget_mb * 1e6);
}

void add_session_options(CLI::App* sub, SessionArgs& a) {
  sub->add_option("--context", a.context,
                  "Most positions per request, prompt and output together; 0 or none: what the session budget holds, "
                  "at most the model's")
      ->transform(whole_number(0, kMaxTokens));
  sub->add_option("--session-budget-mb", a.session_budget_mb,
                  "MB of RAM for the running requests' session states together (serve --parallel); 0 or none: 80% of what the spine, expert "
                  "cache and prompt cache leave")
      ->check(number(0));
}

}  // namespace deltafin::cli
