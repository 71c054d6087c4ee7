// deltafin setup (design.md §3). Order of work, chosen so that a failure or
// Ctrl-C at any point leaves nothing half-written and a rerun finishes the job:
//   1. check everything that can be checked without writing: options, drives,
//      the checkpoint, an existing store's source, free space;
//   2. remove temporaries of crashed or killed writers (all of them: the
//      store's lock, held from the start, proves none is alive) and the old
//      manifest;
//   3. copy the metadata files, write the spine files, copy the experts — each
//      file under a temporary name, synced, renamed, read back and verified;
//      files already there with the right hash are kept;
//   4. write store.json last, so a store with a manifest is complete.
#include "store/setup.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "model/registry.h"
#include "store/drive_probe.h"
#include "store/hash_journal.h"
#include "store/heat.h"
#include "store/install.h"
#include "store/placement.h"
#include "store/spine_writer.h"
#include "store/store_files.h"
#include "store/store_manifest.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/file.h"
#include "util/progress.h"
#include "util/sha256.h"
#include "util/thread_pool.h"

namespace deltafin {

namespace fs = std::filesystem;

namespace {

// Spine goes BF16 (exact) while it takes at most this share of the RAM budget;
// the rest is the expert cache's, and a cache of a few percent of the experts
// is too small to run well.
constexpr double kBf16SpineShare = 0.75;

// RAM sizes in binary units, as RAM is sold.
std::string gib(double bytes) {
  char buf[32];
  if (bytes < 1024.0 * 1024.0 * 1024.0)
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  else
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::vector<std::string> check_drives(const std::vector<std::string>& drives) {
  if (drives.empty()) fail("--drives: at least one drive directory is needed");
  std::vector<std::string> out;
  std::map<std::string, std::string> seen;  // canonical -> as given
  for (const std::string& d : drives) {
    std::error_code ec;
    if (d.empty()) fail("--drives: an empty path");
    if (!fs::exists(d, ec)) fail("--drives: '", d, "' does not exist (create the directory on the drive first)");
    if (!fs::is_directory(d, ec)) fail("--drives: '", d, "' is not a directory");
    const std::string canon = fs::canonical(d).string();
    auto [it, fresh] = seen.emplace(canon, d);
    if (!fresh) fail("--drives: '", it->second, "' and '", d, "' are the same directory (", canon, ")");
    if (::access(canon.c_str(), W_OK) != 0) fail("--drives: '", d, "' is not writable");
    out.push_back(canon);
  }
  return out;
}

SourceFile source_meta(const std::string& dir, const std::string& name, std::string* contents) {
  const std::string path = (fs::path(dir) / name).string();
  *contents = read_text_file(path);
  return SourceFile{name, contents->size(), to_hex(sha256(contents->data(), contents->size()))};
}

// store/drives.json: the probed bandwidths, reused while --drives is the same list.
std::vector<StoreDrive> load_probed_drives(const std::string& store, const std::vector<std::string>& drives) {
  const std::string path = store + "/drives.json";
  if (!file_exists(path)) return {};
  try {
    const nlohmann::json j = nlohmann::json::parse(read_text_file(path));
    std::vector<StoreDrive> out;
    for (const nlohmann::json& d : j.at("drives"))
      out.push_back({d.at("path").get<std::string>(), d.at("read_bytes_per_s").get<double>(),
                     d.at("bandwidth_source").get<std::string>()});
    if (out.size() != drives.size()) return {};
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].path != drives[i] || !(out[i].read_bytes_per_s > 0)) return {};
    return out;
  } catch (const nlohmann::json::exception&) {
    say(cat(path, ": unreadable; probing the drives again"));
    return {};
  }
}

void save_probed_drives(const std::string& store, const std::vector<StoreDrive>& drives) {
  nlohmann::json list = nlohmann::json::array();
  for (const StoreDrive& d : drives)
    list.push_back({{"path", d.path}, {"read_bytes_per_s", d.read_bytes_per_s}, {"bandwidth_source", d.bandwidth_source}});
  write_file_atomic(store + "/drives.json", nlohmann::json{{"drives", list}}.dump(1) + "\n");
}

uint64_t physical_ram() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) fail("cannot read the physical RAM size; pass --ram-gb");
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

struct SpineChoice {
  SpineFormat format;
  std::string reason;
};

SpineChoice choose_spine(const std::string& mode, uint64_t bf16_bytes, uint64_t int8_bytes, double budget,
                         const std::string& budget_source) {
  if (mode == "bf16") return {SpineFormat::BF16, "requested (--spine bf16)"};
  if (mode == "int8" || mode == "int8-row") return {SpineFormat::Int8Row, "requested (--spine int8)"};
  if (mode != "auto") fail("--spine: '", mode, "' (expected auto, bf16 or int8)");
  if (static_cast<double>(bf16_bytes) <= kBf16SpineShare * budget)
    return {SpineFormat::BF16, cat(human_bytes(static_cast<double>(bf16_bytes)), " BF16 spine fits 75% of the ",
                                   gib(budget), " RAM budget (", budget_source, ")")};
  return {SpineFormat::Int8Row,
          cat(human_bytes(static_cast<double>(bf16_bytes)), " BF16 spine exceeds 75% of the ", gib(budget),
              " RAM budget (", budget_source, "); int8-row takes ", human_bytes(static_cast<double>(int8_bytes)),
              " and is not weight-exact (k3-model.md §5.2)")};
}

}  // namespace

SetupReport run_setup(const SetupOptions& o) {
  if (o.from.empty()) fail("--from: the checkpoint directory is required");
  if (o.store.empty()) fail("--store: the store directory is required");
  if (o.replicate_hot < 0) fail("--replicate-hot: ", o.replicate_hot, " (must be >= 0)");
  if (o.threads < 1) fail("--threads: ", o.threads, " (must be >= 1)");
  if (o.ram_gb && !(*o.ram_gb > 0)) fail("--ram-gb: ", *o.ram_gb, " (must be > 0)");
  if (o.spine != "auto" && o.spine != "bf16" && o.spine != "int8" && o.spine != "int8-row")
    fail("--spine: '", o.spine, "' (expected auto, bf16 or int8)");
  const std::vector<std::string> drives = check_drives(o.drives);
  if (!o.drive_mbps.empty() && o.drive_mbps.size() != drives.size())
    fail("--drive-mbps: ", o.drive_mbps.size(), " values for ", drives.size(), " drives");
  for (double v : o.drive_mbps)
    if (!(v > 0) || !std::isfinite(v)) fail("--drive-mbps: ", v, " (every value must be > 0)");
  if (o.replicate_hot > 0 && drives.size() < 2)
    fail("--replicate-hot ", o.replicate_hot, ": replicas need a second drive, but --drives names one");
  if (o.layout != "auto" && o.layout != "whole" && o.layout != "striped")
    fail("--layout: '", o.layout, "' (expected auto, whole or striped)");
  if (o.layout == "striped" && drives.size() < 2)
    fail("--layout striped: stripes need two drives or more, but --drives names one");
  if (o.layout == "striped" && o.replicate_hot > 0)
    fail("--layout striped with --replicate-hot ", o.replicate_hot,
         ": a striped expert is already read from every drive at once; replicas are for --layout whole");
  if (o.layout == "striped" && o.remote)
    fail("--layout striped with --stream: a streamed store fetches and keeps whole experts; use --layout whole or auto");

  const auto t0 = std::chrono::steady_clock::now();
  SetupReport report;
  std::unique_ptr<FamilyCheckpoint> opened;
  const FamilyCheckpoint& k = o.checkpoint ? *o.checkpoint : *(opened = open_family_checkpoint(o.from));
  const bool streamed = o.remote.has_value();
  const int64_t L = k.layers(), E = k.experts();
  const std::vector<int64_t> moe_layers = k.moe_layers();
  const auto is_moe_layer = [&](int64_t l) { return std::binary_search(moe_layers.begin(), moe_layers.end(), l); };
  const uint64_t record_bytes = k.record_bytes();

  // Source identity.
  StoreManifest m;
  m.source_dir = streamed ? o.remote->url : fs::canonical(o.from).string();
  std::map<std::string, std::string> copies;  // name -> contents
  // The metadata files copied into the store: config.json and the family's
  // tokenizer files (their hashes are recorded; the engine reads them from the
  // store). Shards are recorded by name and size only: their content is
  // covered expert by expert and by the spine files' hashes.
  std::vector<std::string> copied = {"config.json"};
  for (const std::string& f : k.tokenizer_files()) copied.push_back(f);
  for (const std::string& name : copied) {
    if (!fs::exists(fs::path(o.from) / name)) continue;
    m.source_files.push_back(source_meta(o.from, name, &copies[name]));
  }
  for (const auto& shard : k.tensors().shards())
    m.source_files.push_back({fs::path(shard->path()).filename().string(), shard->file_size(), ""});

  // The store directory; an existing manifest must describe the same source.
  fs::create_directories(o.store);
  const std::string store = fs::canonical(o.store).string();
  StoreLockWait lock_wait;
  lock_wait.on_wait = [&] {
    say(cat(store_lock_path(store), ": a deltafin run, serve or prefetch is writing into this store (its heat "
            "histogram or a fetched expert); waiting up to ", lock_wait.seconds, " s for it to finish"));
  };
  StoreLock lock(store, lock_wait);  // held to the end: the sweep below relies on it
  std::optional<StoreManifest> previous;  // the store being rebuilt, when there is one
  if (file_exists(store + "/store.json")) {
    const StoreManifest& old = previous.emplace(with_context(
        cat(store, ": existing store (delete store.json to rebuild from scratch)"), [&] { return load_store_manifest(store); }));
    auto same = [](const SourceFile& a, const SourceFile& b) {
      return a.name == b.name && a.bytes == b.bytes && a.sha256 == b.sha256;
    };
    bool match = old.source_files.size() == m.source_files.size();
    for (size_t i = 0; match && i < m.source_files.size(); ++i) match = same(old.source_files[i], m.source_files[i]);
    if (!match)
      fail(store, "/store.json: field 'source.files': the store was built from another checkpoint (", old.source_dir,
           ") than --from ", m.source_dir, "; use another --store directory, or delete this one");
  }

  // Checked before anything is written (see keep_hashes below).
  if (streamed && previous && !previous->remote)
    fail(store, ": holds a store built from a local checkpoint (", previous->source_dir,
         "); setup --stream over it cannot tell whether the mirror serves the same experts and would have to fetch "
         "them all again. Use another --store directory, or delete ", store, "/store.json to rebuild it");

  // Spine format and the RAM budget.
  const SpinePlan bf16_plan = plan_spine(k, SpineFormat::BF16);
  if ((o.spine == "int8" || o.spine == "int8-row") && !k.int8_row_spine())
    fail("--spine int8: an int8-row spine is not available for ", k.family(), " models; their spine stays bf16");
  // A family without an int8-row loader gets the BF16 plan for both, so auto keeps it.
  const SpinePlan int8_plan = k.int8_row_spine() ? plan_spine(k, SpineFormat::Int8Row) : bf16_plan;
  const double budget = o.ram_gb ? *o.ram_gb * 1024.0 * 1024.0 * 1024.0 : static_cast<double>(physical_ram());
  const std::string budget_source = o.ram_gb ? "--ram-gb" : "physical RAM";
  const SpineChoice spine =
      k.int8_row_spine() ? choose_spine(o.spine, bf16_plan.resident_bytes, int8_plan.resident_bytes, budget, budget_source)
                         : SpineChoice{SpineFormat::BF16, cat("the only spine ", k.family(), " models load")};
  const SpinePlan& plan = spine.format == SpineFormat::BF16 ? bf16_plan : int8_plan;
  m.spine_format = spine.format;
  m.spine_reason = spine.reason;
  m.spine_bytes = plan.resident_bytes;
  report.spine_format = spine_format_name(spine.format);
  report.spine_reason = spine.reason;
  say(cat("spine: ", report.spine_format, " — ", spine.reason));
  const double left = budget - static_cast<double>(plan.resident_bytes);
  say(cat("RAM budget ", gib(budget), " (", budget_source, "): spine ", human_bytes(static_cast<double>(plan.resident_bytes)),
          ", ", left > 0 ? gib(left) : std::string("nothing"), " left for the expert cache",
          left > 0 ? "" : " — the spine alone does not fit; runs will page"));

  // Drive bandwidth: given, or probed once per store and remembered in
  // drives.json, so a resumed setup places experts exactly as the first run
  // did (a second probe would differ by noise and could move files).
  const std::vector<StoreDrive> remembered = o.drive_mbps.empty() ? load_probed_drives(store, drives) : std::vector<StoreDrive>{};
  for (size_t d = 0; d < drives.size(); ++d) {
    StoreDrive sd;
    sd.path = drives[d];
    std::string note;
    if (!o.drive_mbps.empty()) {
      sd.read_bytes_per_s = o.drive_mbps[d] * 1e6;
      sd.bandwidth_source = "given by --drive-mbps";
    } else if (!remembered.empty()) {
      sd = remembered[d];
      note = " by an earlier run (delete drives.json to probe again)";
    } else {
      DriveProbeResult p = probe_drive(drives[d], o.probe_bytes);
      sd.read_bytes_per_s = p.bytes_per_s;
      sd.bandwidth_source = p.method();
    }
    say(cat("drive ", d, ": ", sd.path, ": ", human_bytes(sd.read_bytes_per_s), "/s, ", sd.bandwidth_source, note));
    report.drive_bytes_per_s.push_back(sd.read_bytes_per_s);
    m.drives.push_back(sd);
  }
  const bool remember = o.drive_mbps.empty() && remembered.empty();

  // Placement, with the hottest experts replicated when a heat histogram exists.
  PlacementInput pin;
  pin.layers = L;
  pin.experts = E;
  pin.moe_layers = moe_layers;
  pin.drive_bytes_per_s = report.drive_bytes_per_s;
  // The heat the cache and --replicate-hot read also decides which drive
  // holds which expert (whole layout), so the hottest spread over the drives.
  const bool have_heat = file_exists(store + "/heat.json");
  if (have_heat) {
    const HeatHistogram heat = HeatHistogram::load(store, L, E);
    pin.heat.resize(static_cast<size_t>(L * E));
    for (int64_t l : moe_layers)
      for (int64_t e = 0; e < E; ++e) pin.heat[static_cast<size_t>(l * E + e)] = heat.at(l, e);
  }
  // A rerun on the same drives keeps every primary where it is: placing
  // afresh (new heat) would move, so rewrite, most of the store.
  if (previous && !previous->remote && !previous->striped() && previous->drives.size() == drives.size() &&
      previous->layers == L && previous->experts == E) {
    pin.keep_primaries.assign(static_cast<size_t>(L * E), 0);
    for (int64_t l : moe_layers)
      for (int64_t e = 0; e < E; ++e)
        if (!previous->entry(l, e).drives.empty())
          pin.keep_primaries[static_cast<size_t>(l * E + e)] = previous->entry(l, e).drives[0];
  }
  if (o.replicate_hot > 0) {
    if (!have_heat) {
      say(cat("--replicate-hot ", o.replicate_hot, ": nothing replicated: there is no heat histogram yet (",
              store, "/heat.json is written by runs; rerun setup after some use)"));
    } else {
      const HeatHistogram heat = HeatHistogram::load(store, L, E);
      for (const auto& [l, e] : heat.hottest(static_cast<size_t>(o.replicate_hot) + static_cast<size_t>(E)))
        if (is_moe_layer(l) && pin.replicate.size() < static_cast<size_t>(o.replicate_hot)) pin.replicate.push_back({l, e});
      say(cat("--replicate-hot ", o.replicate_hot, ": ", pin.replicate.size(), " hottest experts get a second drive",
              pin.replicate.size() < static_cast<size_t>(o.replicate_hot) ? " (no others have been used)" : ""));
    }
  }
  const std::vector<std::vector<uint16_t>> placed = place_experts(pin);

  // Layout (see SetupOptions::layout).
  constexpr uint64_t kMinAutoStripe = 1u << 20;
  std::string layout_reason = "requested";
  bool striped = o.layout == "striped";
  if (o.layout == "auto") {
    // A rerun keeps the store's layout: switching would write a second copy of every expert.
    if (previous && previous->drives.size() == drives.size() && !streamed && o.replicate_hot == 0) {
      striped = previous->striped();
      layout_reason = "the existing store's layout (--layout changes it)";
    } else if (drives.size() < 2) layout_reason = "one drive";
    else if (streamed) layout_reason = "a streamed store keeps whole experts";
    else if (o.replicate_hot > 0) layout_reason = "--replicate-hot copies whole experts";
    else if (record_bytes < kMinAutoStripe * drives.size())
      layout_reason = cat("expert records of ", record_bytes, " bytes are under 1 MiB per drive");
    else striped = true, layout_reason = cat("each expert read uses all ", drives.size(), " drives at once");
  }
  if (striped) {
    m.stripe_offsets = stripe_offsets_for(record_bytes, report.drive_bytes_per_s);
  }
  report.layout = striped ? "striped" : "whole";
  report.layout_reason = layout_reason;
  say(cat("layout: ", report.layout, " — ", layout_reason));
  m.expert_bytes = record_bytes;  // (m.drives and m.stripe_offsets are set: m names every file from here on)
  // The drives holding (l, e): every one when striped, else where placement put it.
  std::vector<uint16_t> every_drive;
  for (size_t d = 0; d < drives.size(); ++d) every_drive.push_back(static_cast<uint16_t>(d));
  auto drives_of = [&](int64_t l, int64_t e) -> const std::vector<uint16_t>& {
    return striped ? every_drive : placed[static_cast<size_t>(l * E + e)];
  };

  // Free space, before anything is written. Files already there with the right
  // size count as done (the hash check comes later and may still rewrite one;
  // a rename replaces it, so that needs no extra room beyond slack).
  struct Need {
    uint64_t bytes = 0;
    std::string where, path;
  };
  std::map<uint64_t, Need> need;  // by filesystem
  auto add_need = [&](const std::string& where, const std::string& path, uint64_t bytes) {
    Need& n = need[device_of(path)];
    n.bytes += bytes;
    if (n.where.empty()) n.where = where, n.path = path;
    else if (n.where.find(where) == std::string::npos) n.where += " and " + where;
  };
  add_need(cat("store ", store), store, 0);
  for (const SpineFilePlan& f : plan.files)
    if (!has_size(store + "/" + f.path, f.bytes)) add_need(cat("store ", store), store, f.bytes);
  for (size_t d = 0; d < drives.size(); ++d) add_need(cat("drive ", drives[d]), drives[d], 0);
  for (int64_t l : pin.moe_layers)
    for (int64_t e = 0; e < E && !streamed; ++e)  // streamed experts come later, within --disk-budget
      for (uint16_t d : drives_of(l, e))
        if (!has_size(m.file_on_drive(d, l, e), m.bytes_on_drive(d)))
          add_need(cat("drive ", drives[d]), drives[d], m.bytes_on_drive(d));
  for (const auto& [dev, n] : need) {
    const uint64_t free = o.fake_free_bytes ? *o.fake_free_bytes : free_bytes(n.path);
    if (n.bytes > free)
      fail(n.where, ": not enough free space: setup needs ", n.bytes, " bytes (", human_bytes(static_cast<double>(n.bytes)),
           ") there, the filesystem has ", free, " bytes (", human_bytes(static_cast<double>(free)), ") free");
  }

  // From here on files are written. First clear what a crashed run left:
  // with the store's lock held exclusively no writer is alive (every other
  // one holds it shared while its temporary exists), so every temporary in
  // these places is a dead writer's, whichever process its pid names now.
  InterruptGuard interrupts;
  fs::create_directories(store + "/spine");
  for (const TempPlace& p : store_temp_places(store, drives)) {
    const TempsRemoved r = remove_temps(p.dir, p.prefix);
    report.temps_removed += r.files;
    report.temp_bytes_removed += r.bytes;
  }
  if (report.temps_removed)
    say(cat("removed ", report.temps_removed, " temporary files (", report.temp_bytes_removed,
            " bytes) left by interrupted writers"));
  if (remember) save_probed_drives(store, m.drives);
  if (file_exists(store + "/store.json") && ::unlink((store + "/store.json").c_str()) != 0)
    fail(store, "/store.json: cannot remove the old manifest before rewriting the store");

  uint64_t total = plan.file_bytes;
  for (const auto& p : placed) total += streamed || p.empty() ? 0 : (striped ? record_bytes : p.size() * record_bytes);
  Progress progress("setup", total, !o.quiet);
  std::mutex progress_mutex;
  auto advance = [&](uint64_t bytes) {
    std::lock_guard<std::mutex> g(progress_mutex);
    progress.add(bytes);
  };

  for (const auto& [name, contents] : copies) {
    const std::string path = store + "/" + name;
    if (!has_size(path, contents.size()) || hash_file(path, false) != sha256(contents.data(), contents.size()))
      write_file_atomic(path, contents);
  }

  // Spine files.
  for (const SpineFilePlan& f : plan.files) {
    check_interrupt();
    const std::string path = store + "/" + f.path;
    auto produce = [&](const std::function<void(const uint8_t*, size_t)>& out) { generate_spine_file(k, f, out); };
    Sha256Digest digest{};
    bool done = false;
    if (has_size(path, f.bytes)) {
      Sha256 h;
      produce([&](const uint8_t* p, size_t n) {
        check_interrupt();
        h.update(p, n);
      });
      digest = h.finish();
      done = hash_file(path, false) == digest;
    }
    if (!done) {
      digest = write_verified(path, produce, f.bytes);
      report.bytes_written += f.bytes;
    }
    advance(f.bytes);
    m.spine_files.push_back({f.path, f.bytes, to_hex(digest)});
  }

  // Experts: workers take (layer, expert) jobs in order; each reads the record
  // once from the shards and installs it on every drive placed for it.
  for (size_t d = 0; d < drives.size(); ++d)
    for (int64_t l : pin.moe_layers)
      fs::create_directories(drives[d] + "/" + fs::path(expert_relative_path(l, 0)).parent_path().string());
  m.family = k.family();
  m.layers = L;
  m.moe_layers = moe_layers;
  m.record = k.record_layout();
  m.experts = E;
  m.entries.assign(m.moe_layers.size() * static_cast<size_t>(E), ExpertEntry{});
  // A streamed rebuild trusts the hashes of the store it replaces only when
  // that store was streamed from the very same shard files (names, sizes and
  // ETags): config and sizes alone do not tell a fine-tune from its base, and
  // a wrong hash kept here would either refuse every fetch or let old expert
  // files stand in for the new model. Otherwise the fetch journal goes too.
  bool keep_hashes = false;
  if (streamed && previous && previous->remote) {
    const auto& a = previous->remote->shards;
    const auto& b = o.remote->shards;
    keep_hashes = a.size() == b.size();
    for (size_t i = 0; keep_hashes && i < a.size(); ++i)
      keep_hashes = a[i].name == b[i].name && a[i].bytes == b[i].bytes && !a[i].etag.empty() && a[i].etag == b[i].etag;
  }
  if (streamed && !keep_hashes && file_exists(HashJournal::path(store))) {
    say(cat("the mirror's shards differ from the ones this store was streamed from (or it was not streamed): "
            "forgetting the hashes of fetched experts; they will be fetched again"));
    fs::remove(HashJournal::path(store));
  }
  std::vector<std::pair<int64_t, int64_t>> jobs;
  for (int64_t l : pin.moe_layers)
    for (int64_t e = 0; e < E; ++e) {
      if (!streamed) {
        jobs.push_back({l, e});
        continue;
      }
      // Placed only: the fetcher installs the file and learns the hash. A
      // hash the store already had (verified against the source by an
      // earlier setup of the same checkpoint) is kept.
      ExpertEntry& entry = m.moe_entry(l, e);
      entry.drives = placed[static_cast<size_t>(l * E + e)];
      entry.hash_known = false;
      if (keep_hashes && previous->entry(l, e).hash_known) {
        entry.sha256 = previous->entry(l, e).sha256;
        entry.crc32c = previous->entry(l, e).crc32c;
        entry.hash_known = true;
      }
    }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> written{0}, skipped{0}, written_bytes{0};
  ThreadPool pool(o.threads);
  pool.parallel_for(static_cast<size_t>(o.threads), [&](size_t, size_t) {
    try {
      for (size_t j; !failed && (j = next.fetch_add(1)) < jobs.size();) {
        check_interrupt();
        const auto [l, e] = jobs[j];
        const std::vector<uint8_t> record = k.read_expert_record(l, e);
        ExpertEntry& entry = m.moe_entry(l, e);
        entry.drives = drives_of(l, e);
        entry.sha256 = sha256(record.data(), record.size());
        entry.crc32c = crc32c(record.data(), record.size());
        for (uint16_t d : entry.drives) {
          // The bytes this drive holds: a stripe of the record, or all of it.
          const uint64_t off = striped ? m.stripe_offsets[d] : 0, len = m.bytes_on_drive(d);
          const uint8_t* bytes = record.data() + off;
          if (striped) entry.stripe_crc32c.push_back(crc32c(bytes, len));
          const Sha256Digest want = striped ? sha256(bytes, len) : entry.sha256;
          const std::string path = m.file_on_drive(d, l, e);
          if (has_size(path, len) && hash_file(path, false) == want) {
            ++skipped;
          } else {
            const Sha256Digest got = write_verified(path, [&](const auto& out) { out(bytes, len); }, len);
            if (got != want) fail(path, ": internal error: written bytes differ from the record");
            written_bytes += len;
            if (++written == o.stop_after_experts) ::raise(SIGINT);
          }
          advance(len);
        }
      }
    } catch (...) {
      failed = true;
      throw;
    }
  });
  check_interrupt();
  progress.finish();
  report.experts_written = written;
  report.experts_skipped = skipped;
  report.bytes_written += written_bytes;

  m.remote = o.remote;
  if (o.write_remote_files) o.write_remote_files(store);
  save_store_manifest(store, m);
  // The layout changed: the old layout's expert files are not the store's any
  // more (removed only now that the new manifest is in place).
  if (previous && previous->striped() != striped && !previous->remote) {
    size_t removed = 0;
    for (int64_t l = 0; l < previous->layers; ++l)  // (a dense layer has no drives)
      for (int64_t e = 0; e < previous->experts; ++e)
        for (uint16_t d : previous->entry(l, e).drives)
          removed += ::unlink(previous->file_on_drive(d, l, e).c_str()) == 0;
    say(cat("layout changed to ", report.layout, ": removed ", removed, " expert files of the old layout"));
  } else if (previous && !previous->remote && !striped && !previous->striped()) {
    // Same whole layout, new placement (heat moved experts, replicas came or
    // went): the old copies the new manifest does not name are removed.
    size_t removed = 0;
    std::set<std::string> named;
    for (int64_t l = 0; l < m.layers; ++l)
      for (int64_t e = 0; e < m.experts; ++e)
        for (uint16_t d : m.entry(l, e).drives) named.insert(m.file_on_drive(d, l, e));
    for (int64_t l = 0; l < previous->layers; ++l)
      for (int64_t e = 0; e < previous->experts; ++e)
        for (uint16_t d : previous->entry(l, e).drives) {
          const std::string f = previous->file_on_drive(d, l, e);
          if (!named.count(f)) removed += ::unlink(f.c_str()) == 0;
        }
    if (removed) say(cat("placement changed: removed ", removed, " expert files the store no longer names"));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace deltafin
