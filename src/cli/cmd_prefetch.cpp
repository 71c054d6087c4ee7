// deltafin prefetch: fill a streamed store's drives from its mirror ahead of use.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "model/common/family_checkpoint.h"
#include "model/registry.h"
#include "remote/prefetch_experts.h"
#include "store/store_manifest.h"
#include "util/error.h"
#include "util/progress.h"

namespace deltafin::cli {

namespace {

struct PrefetchArgs {
  std::string store, layers;
  bool all = false, quiet = false;
  int fetch_threads = 4;
};

// "A-B" or "A" (inclusive MoE layer numbers).
PrefetchRange parse_layers(const std::string& text) {
  PrefetchRange r;
  const size_t dash = text.find('-');
  auto number = [&](const std::string& s) -> int64_t {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
      fail("--layers: '", text, "' (expected A-B or A, layer numbers)");
    return std::stoll(s);
  };
  r.first_layer = number(text.substr(0, dash));
  r.last_layer = dash == std::string::npos ? r.first_layer : number(text.substr(dash + 1));
  return r;
}

int run(const PrefetchArgs& a) {
  if (a.all == !a.layers.empty()) fail("give exactly one of --all or --layers A-B");
  const StoreManifest m = load_store_manifest(a.store);
  if (!m.remote) fail(a.store, "/store.json: not a streamed store (set up without --stream): its experts are all local");
  FetchOptions fo;
  fo.threads = a.fetch_threads;
  fo.matrices = mxfp4_matrices(m.record.empty() ? record_layout_of(a.store) : m.record);  // stores before v4 did not record it
  const PrefetchRange range = a.all ? PrefetchRange{} : parse_layers(a.layers);
  const PrefetchReport r = prefetch_experts(a.store, m, range, fo, a.quiet);
  std::printf("prefetch: %llu experts fetched, %llu already on the drives; %s received in %.1f s, %llu retries\n",
              static_cast<unsigned long long>(r.fetched), static_cast<unsigned long long>(r.already_local),
              human_bytes(static_cast<double>(r.bytes_received)).c_str(), r.seconds,
              static_cast<unsigned long long>(r.retries));
  return 0;
}

}  // namespace

Command add_prefetch(CLI::App& app) {
  auto a = std::make_shared<PrefetchArgs>();
  CLI::App* sub = app.add_subcommand("prefetch", "Fetch a streamed store's experts from its mirror ahead of use (resumable)");
  sub->footer(R"(Fills a streamed store's drives (setup --stream) from its mirror, with progress and ETA. Resumable:
experts already on their drives are skipped; Ctrl-C stops after the fetches in flight and leaves no partial
file. Refuses to start if the experts would not fit the disk budget.)");
  sub->add_option("--store", a->store, "Store directory (set up with --stream)")->required();
  sub->add_option("--layers", a->layers, "MoE layers A-B (inclusive)");
  sub->add_flag("--all", a->all, "Every expert of every layer");
  sub->add_option("--fetch-threads", a->fetch_threads, "Parallel downloads")->transform(whole_number(1, 64))->capture_default_str();
  sub->add_flag("--quiet", a->quiet, "No progress line");
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
