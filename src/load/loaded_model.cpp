#include "load/loaded_model.h"

#include "backend/select/make_backend.h"

#include <cstdio>

#include "remote/expert_fetcher.h"
#include "store/install.h"

namespace deltafin {

// The trace is complete up to here whichever way the run ended (a pass that
// failed midway leaves the routes it computed), so it is always kept. A
// destructor must not throw: a failed write is reported, and the temporary
// file is removed.
LoadedModel::~LoadedModel() {
  if (!route_trace) return;
  if (experts) experts->set_route_observer(nullptr);
  try {
    route_trace->commit();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "route trace not written: %s\n", e.what());
  }
}

void LoadedModel::open_route_trace(const std::string& path) {
  const ModelSummary& s = summary();
  route_trace = std::make_unique<RouteTraceWriter>(path, s.layers, s.experts, s.top_k);
  experts->set_route_observer(route_trace.get());
}

// Skipped while a setup rewrites the store; a serve tries again at its next save.
void LoadedModel::save_heat() {
  if (heat && !store_dir.empty() && !heat->save(store_dir))
    std::fprintf(stderr, "heat histogram not saved: a deltafin setup is rewriting %s (it holds %s)\n",
                 store_dir.c_str(), store_lock_path(store_dir).c_str());
}

ModelInfo LoadedModel::info() const {
  ModelInfo i;
  i.family = family ? family->name : "?";
  i.spine_format = spine_format;
  i.load_seconds = load_seconds;
  i.memory = memory;
  i.expert_bytes = manifest ? manifest->expert_bytes : 0;
  if (backend) {
    i.compute = backend_description(*backend);
    i.compute_stats = backend_placement(*backend);
  }
  if (!stream) return i;
  StreamInfo& s = i.stream.emplace();
  s.drives = manifest->drives.size();
  s.lookahead = route_lookahead() ? route_lookahead()->mode() : LookaheadMode::Off;
  s.io_engine = io_engine_name(stream->reader().engine());
  s.io_note = stream->reader().engine_note();
  s.cache_policy = stream->cache().policy_name();
  s.cache_policy_why = cache_policy_why;
  if (const ExpertFetcher* f = stream->fetcher())
    s.mirror = StreamInfo::Mirror{f->url(), static_cast<uint64_t>(f->local_experts()), f->disk_budget_bytes()};
  return i;
}

}  // namespace deltafin
