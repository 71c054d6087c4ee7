// deltafin setup: a Hugging Face K3 checkpoint -> a deltafin store (design.md §3).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "store/setup.h"
#include "util/error.h"
#include "util/progress.h"

namespace deltafin::cli {

namespace {

struct SetupArgs {
  SetupOptions o;
  std::optional<double> ram_gb;
  int threads = 0;  // 0: one per drive
};

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
  SetupReport r = run_setup(o);
  std::printf("store %s ready: spine %s, %llu expert files written, %llu already there and verified, %s written in %.1f s\n",
              o.store.c_str(), r.spine_format.c_str(), static_cast<unsigned long long>(r.experts_written),
              static_cast<unsigned long long>(r.experts_skipped), human_bytes(static_cast<double>(r.bytes_written)).c_str(),
              r.seconds);
  return 0;
}

}  // namespace

Command add_setup(CLI::App& app) {
  auto a = std::make_shared<SetupArgs>();
  CLI::App* sub = app.add_subcommand("setup", "Build a deltafin store from a K3 checkpoint: spine files plus experts spread over drives");
  sub->add_option("--from", a->o.from, "Hugging Face checkpoint directory")->required();
  sub->add_option("--store", a->o.store, "Store directory (manifest, spine, tokenizer files, heat)")->required();
  sub->add_option("--drives", a->o.drives, "Expert directories, one per drive, comma-separated (must exist)")
      ->required()
      ->delimiter(',');
  sub->add_option("--spine", a->o.spine, "auto (bf16 if it fits 75% of the RAM budget, else int8), bf16 or int8")
      ->check(CLI::IsMember({"auto", "bf16", "int8", "int8-row"}))
      ->capture_default_str();
  sub->add_option("--replicate-hot", a->o.replicate_hot, "Copy the N hottest experts (by heat.json) to a second drive")
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
