// deltafin setup: a Hugging Face K3 checkpoint -> a deltafin store (design.md §3).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "remote/stream_setup.h"
#include "store/setup.h"
#include "util/error.h"
#include "util/progress.h"

namespace deltafin::cli {

namespace {

struct SetupArgs {
  SetupOptions o;
  std::optional<double> ram_gb;
  int threads = 0;  // 0: one per drive
  // From a mirror: --stream (spine only) or --full (everything), --source URL.
  bool stream = false, full = false;
  std::string source;
  double disk_budget_gb = 0;
  int fetch_threads = 4;
};

int run_from_mirror(SetupArgs& a) {
  if (a.stream == a.full) fail("--source needs exactly one of --stream (spine now, experts on demand) or --full");
  if (!a.o.from.empty()) fail("--from and --source: give one (a local checkpoint directory or a mirror URL)");
  if (a.o.replicate_hot > 0) fail("--replicate-hot: not with --source (there is no heat history to choose from yet)");
  StreamSetupOptions so;
  so.setup = a.o;
  so.source_url = a.source;
  so.full = a.full;
  so.disk_budget_bytes = static_cast<uint64_t>(a.disk_budget_gb * 1e9);
  so.fetch.threads = a.fetch_threads;
  const StreamSetupReport r = run_stream_setup(so);
  std::printf("store %s ready: spine %s, experts %s %s; fetched %s in %llu requests for the spine (%.2f%% of the %s checkpoint)\n",
              a.o.store.c_str(), r.setup.spine_format.c_str(), a.full ? "fetched from" : "on demand from", a.source.c_str(),
              human_bytes(static_cast<double>(r.fetched_bytes)).c_str(), static_cast<unsigned long long>(r.requests),
              r.checkpoint_bytes ? 100.0 * static_cast<double>(r.fetched_bytes) / static_cast<double>(r.checkpoint_bytes) : 0.0,
              human_bytes(static_cast<double>(r.checkpoint_bytes)).c_str());
  if (a.full)
    std::printf("--full: %llu experts fetched (%s received)\n", static_cast<unsigned long long>(r.experts_fetched),
                human_bytes(static_cast<double>(r.expert_bytes_fetched)).c_str());
  return 0;
}

// Test hooks; see SetupOptions.
void read_test_hooks(SetupOptions& o) {
  auto number = [](const char* var) -> std::optional<uint64_t> {
    const char* v = std::getenv(var);
    if (!v || !*v) return std::nullopt;
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    if (*end) fail(var, "='", v, "' is not a number");
    return n;
  };
  if (auto n = number("DELTAFIN_SETUP_STOP_AFTER")) o.stop_after_experts = *n;
  if (auto n = number("DELTAFIN_FAKE_FREE_BYTES")) o.fake_free_bytes = *n;
}

int run(SetupArgs& a) {
  SetupOptions& o = a.o;
  o.ram_gb = a.ram_gb;
  o.threads = a.threads > 0 ? a.threads : static_cast<int>(std::max<size_t>(1, o.drives.size()));
  read_test_hooks(o);
  if (!a.source.empty() || a.stream || a.full) return run_from_mirror(a);
  if (o.from.empty()) fail("--from: the checkpoint directory is required (or --source URL with --stream / --full)");
  SetupReport r = run_setup(o);
  std::printf("store %s ready: spine %s, %s layout, %llu expert files written, %llu already there and verified, %s written in %.1f s\n",
              o.store.c_str(), r.spine_format.c_str(), r.layout.c_str(), static_cast<unsigned long long>(r.experts_written),
              static_cast<unsigned long long>(r.experts_skipped), human_bytes(static_cast<double>(r.bytes_written)).c_str(),
              r.seconds);
  return 0;
}

}  // namespace

Command add_setup(CLI::App& app) {
  auto a = std::make_shared<SetupArgs>();
  CLI::App* sub = app.add_subcommand("setup", "Build a deltafin store from a K3 checkpoint: spine files plus experts spread over drives");
  sub->add_option("--from", a->o.from, "Hugging Face checkpoint directory");
  sub->add_option("--source", a->source, "Mirror URL serving the checkpoint's files as URL/<file> (with --stream or --full)");
  sub->add_flag("--stream", a->stream, "From --source: fetch only what the spine needs; experts are fetched on first use");
  sub->add_flag("--full", a->full, "From --source: fetch everything and build a complete local store");
  sub->add_option("--disk-budget", a->disk_budget_gb, "--stream: GB of the drives fetched experts may take (0 = no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--fetch-threads", a->fetch_threads, "--source: parallel downloads")->check(CLI::Range(1, 64))->capture_default_str();
  sub->add_option("--store", a->o.store, "Store directory (manifest, spine, tokenizer files, heat)")->required();
  sub->add_option("--drives", a->o.drives, "Expert directories, one per drive, comma-separated (must exist)")
      ->required()
      ->delimiter(',');
  sub->add_option("--spine", a->o.spine, "auto (bf16 if it fits 75% of the RAM budget, else int8), bf16 or int8")
      ->check(CLI::IsMember({"auto", "bf16", "int8", "int8-row"}))
      ->capture_default_str();
  sub->add_option("--replicate-hot", a->o.replicate_hot, "Copy the N hottest experts (by heat.json) to a second drive")
      ->capture_default_str();
  sub->add_option("--layout", a->o.layout,
                  "striped (each expert cut into one stripe per drive: every read uses all drives), whole (one file "
                  "per expert, needed for --replicate-hot and --stream), or auto (striped over 2+ drives when allowed)")
      ->check(CLI::IsMember({"auto", "whole", "striped"}))
      ->capture_default_str();
  sub->add_option_function<double>("--ram-gb", [a](const double& v) { a->ram_gb = v; },
                                   "RAM budget in GiB for --spine auto (default: physical RAM)");
  sub->add_option("--drive-mbps", a->o.drive_mbps, "Drive read bandwidths in MB/s, comma-separated (skips the probe)")
      ->delimiter(',');
  sub->add_option("--threads", a->threads, "Expert copy threads (default: one per drive)");
  sub->add_flag("--quiet", a->o.quiet, "No progress line");
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
