// deltafin setup: a Hugging Face checkpoint of any supported family -> a
// deltafin store (design.md §3).
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
  CLI::App* sub = app.add_subcommand(
      "setup", "Build a deltafin store from a Hugging Face checkpoint (Kimi K3 or Qwen3-MoE; a directory or a "
               "mirror): spine files plus experts spread over drives");
  sub->footer(R"(From a checkpoint directory (--from): writes store.json (the manifest, written last), copies of
config.json and the tokenizer files, spine/ (one file per layer plus globals, 4 KiB-aligned payloads) and
the experts on the drives: the released bytes of each expert, with SHA-256 (checked against the source
bytes and read back) and CRC-32C recorded. The family comes from config.json. Drive bandwidth comes from
a short O_DIRECT probe, or --drive-mbps.
--layout striped (auto's choice over 2+ drives): every expert is cut at 4 KiB page boundaries into one
stripe per drive, sized by bandwidth (deltafin-experts/L###/E###.s<d>of<N>.bin), so every read uses all
drives at once and no layer waits on its busiest drive. --layout whole (auto's choice with one drive,
--replicate-hot or --stream): deltafin-experts/L###/E###.bin on one drive, the experts of every layer
spread over the drives by bandwidth; --replicate-hot N copies the N hottest experts (heat.json) to a
second drive. Resumable: a rerun verifies and skips finished files; Ctrl-C or a crash leaves no
half-written file under a final name, and a kill -9 at most temporaries (*.tmp-<pid>), which the rerun
removes: setup holds STORE/setup.lock exclusively, and every other writer (a run's heat histogram, a
fetched expert) holds it shared while it writes, so none of them can be alive. A run or serve writing
into the store is waited for up to 60 s; another setup is refused. A drive without room is refused
before anything is written. --spine auto: BF16 if it fits 75% of the RAM budget, else int8-row (NOT
weight-exact; announced in every run).

From a mirror (--source URL with --stream or --full): the mirror serves the checkpoint's files as
URL/<file> over HTTP(S) (a static file server that honours byte ranges: nginx, a CDN). --stream moves
only what the spine needs: config.json, the tokenizer files, the index, each shard's safetensors header
and the non-expert tensors (range requests), writes the spine and a manifest whose expert placements are
remote (any family: the mirror's config.json says which). An expert is fetched on first use by range
requests of its record's tensors (K3's six MXFP4 tensors, Qwen3-MoE's gate, up and down projections;
offsets from the headers, kept in STORE/remote/experts.bin), checked (its recorded hash, and the MXFP4
structure where the record has MXFP4 matrices), written atomically to the drive its placement names and
used; run --stats shows fetch counts, bytes and time. --disk-budget caps the drive space fetched experts
take: when full, the coldest (heat histogram) are deleted, never one being read and never a spine file.
--full fetches everything through the same fetcher and ends with a complete local store. Rerunning over a
store streamed from the same shard files (names, sizes, ETags) keeps what was fetched; if the mirror's
shards differ, the recorded hashes are forgotten and experts are fetched again; over a store built from a
local checkpoint it is refused. What is checked against what: docs/mirror.md.)");
  sub->add_option("--from", a->o.from, "Hugging Face checkpoint directory");
  sub->add_option("--source", a->source, "Mirror URL serving the checkpoint's files as URL/<file>, with --stream or --full");
  sub->add_flag("--stream", a->stream, "From --source: fetch only what the spine needs; experts are fetched on first use");
  sub->add_flag("--full", a->full, "From --source: fetch everything and build a complete local store");
  sub->add_option("--disk-budget", a->disk_budget_gb, "--stream: GB of the drives fetched experts may take; 0 = no limit")
      ->check(number(0))
      ->capture_default_str();
  sub->add_option("--fetch-threads", a->fetch_threads, "--source: parallel downloads")->transform(whole_number(1, 64))->capture_default_str();
  sub->add_option("--store", a->o.store, "Store directory: manifest, spine, tokenizer files, heat")->required();
  sub->add_option("--drives", a->o.drives, "Expert directories, one per drive, comma-separated; they must exist")
      ->required()
      ->delimiter(',');
  sub->add_option("--spine", a->o.spine, "The spine's format; auto: bf16 if it fits 75% of the RAM budget, else int8-row (not weight-exact)")
      ->check(one_of({"auto", "bf16", "int8", "int8-row"}))
      ->capture_default_str();
  sub->add_option("--replicate-hot", a->o.replicate_hot, "Copy the N hottest experts of heat.json to a second drive")
      ->transform(whole_number(0))
      ->capture_default_str();
  sub->add_option("--layout", a->o.layout,
                  "striped: each expert cut into one stripe per drive, so every read uses all drives; whole: one file "
                  "per expert, needed for --replicate-hot and --stream; auto: striped over 2+ drives when allowed")
      ->check(one_of({"auto", "whole", "striped"}))
      ->capture_default_str();
  sub->add_option_function<double>("--ram-gb", [a](const double& v) { a->ram_gb = v; },
                                   "RAM budget in GiB for --spine auto; default the physical RAM")
      ->check(number_above(0));
  sub->add_option("--drive-mbps", a->o.drive_mbps, "Drive read bandwidths in MB/s, comma-separated; skips the probe")
      ->check(number_above(0))
      ->delimiter(',');
  sub->add_option("--threads", a->threads, "Expert copy threads; 0 = one per drive")
      ->transform(whole_number(0, kMaxThreads))
      ->capture_default_str();
  sub->add_flag("--quiet", a->o.quiet, "No progress line");
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
