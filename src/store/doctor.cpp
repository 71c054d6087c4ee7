#include "store/doctor.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <unordered_set>

#include "store/hash_journal.h"
#include "store/heat.h"
#include "store/spine_layout.h"
#include "store/store_files.h"
#include "store/store_manifest.h"
#include "util/error.h"
#include "util/file.h"
#include "util/progress.h"
#include "util/thread_pool.h"

namespace deltafin {

namespace fs = std::filesystem;

namespace {

// "" when path is a regular file of `bytes` bytes, else what is wrong.
std::string size_problem(const std::string& path, uint64_t bytes) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return "missing";
  if (!fs::is_regular_file(path, ec)) return "not a regular file";
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return "cannot stat: " + ec.message();
  if (size != bytes) return cat("size ", size, " bytes, store.json records ", bytes, size < bytes ? " (truncated)" : "");
  return "";
}

// The temporaries directly in dir whose names start with prefix.
void add_temps(const std::string& dir, const std::string& prefix, std::vector<StrayFile>& out) {
  std::error_code ec;
  std::vector<StrayFile> found;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code size_ec;
    if (name.starts_with(prefix) && is_temp_name(name) && it->is_regular_file(size_ec))
      found.push_back({it->path().string(), it->file_size(size_ec), true});
  }
  std::sort(found.begin(), found.end(), [](const StrayFile& a, const StrayFile& b) { return a.path < b.path; });
  out.insert(out.end(), found.begin(), found.end());
}

// Every regular file under root (recursively) whose lexically normal path is not in `named`.
void add_unnamed(const std::string& root, const std::unordered_set<std::string>& named, std::vector<StrayFile>& out) {
  std::error_code ec;
  std::vector<StrayFile> found;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (!it->is_regular_file(size_ec) || named.count(it->path().lexically_normal().string())) continue;
    found.push_back({it->path().string(), it->file_size(size_ec), is_temp_name(it->path().filename().string())});
  }
  std::sort(found.begin(), found.end(), [](const StrayFile& a, const StrayFile& b) { return a.path < b.path; });
  out.insert(out.end(), found.begin(), found.end());
}

// Files in the store's places that the manifest does not name (see run_doctor
// in doctor.h). A missing drive (drive_ok false) is a problem already.
std::vector<StrayFile> find_strays(const StoreManifest& m, const std::string& store,
                                   const std::vector<bool>& drive_ok) {
  std::vector<StrayFile> out;
  add_temps(store, "", out);
  std::unordered_set<std::string> named;
  for (const SpineFileEntry& s : m.spine_files) named.insert((fs::path(store) / s.path).lexically_normal().string());
  add_unnamed(store + "/spine", named, out);
  add_temps(store + "/remote", "", out);
  for (size_t d = 0; d < m.drives.size(); ++d) {
    add_temps(m.drives[d].path, "deltafin-probe.tmp-", out);
    if (!drive_ok[d]) continue;
    named.clear();
    for (int64_t l = 0; l < m.layers; ++l)
      for (int64_t e = 0; e < m.experts; ++e)
        for (uint16_t x : m.entry(l, e).drives)
          if (x == d) named.insert(fs::path(m.file_on_drive(static_cast<int>(d), l, e)).lexically_normal().string());
    add_unnamed(m.drives[d].path + "/deltafin-experts", named, out);
  }
  return out;
}

}  // namespace

uint64_t DoctorReport::stray_bytes() const {
  uint64_t n = 0;
  for (const StrayFile& f : strays) n += f.bytes;
  return n;
}

DoctorReport run_doctor(const std::string& store_dir, bool full) { return run_doctor(store_dir, full, false, 1); }

DoctorReport run_doctor(const std::string& store_dir, bool full, bool progress, int threads) {
  DoctorReport r;
  StoreManifest m;
  try {
    m = load_store_manifest(store_dir);
  } catch (const Error& e) {
    r.problems.push_back(e.what());  // nothing else can be checked without it
    return r;
  }
  ++r.files_checked;
  const std::string store = fs::path(store_dir).string();

  // Copied metadata files: small, always hashed.
  for (const SourceFile& s : m.source_files) {
    if (s.sha256.empty()) continue;  // a shard: recorded, not copied
    const std::string path = store + "/" + s.name;
    ++r.files_checked;
    if (std::string p = size_problem(path, s.bytes); !p.empty()) {
      r.problems.push_back(cat(path, ": ", p));
      continue;
    }
    r.bytes_hashed += s.bytes;
    if (to_hex(hash_file(path, false)) != s.sha256)
      r.problems.push_back(cat(path, ": SHA-256 differs from store.json (source file ", s.name, ")"));
  }

  if (file_exists(store + "/heat.json")) {
    ++r.files_checked;
    try {
      HeatHistogram::load(store, m.layers, m.experts);
    } catch (const Error& e) {
      r.problems.push_back(e.what());
    }
  }

  uint64_t hash_total = 0;
  if (full) {
    for (const SpineFileEntry& s : m.spine_files) hash_total += s.bytes;
    for (const ExpertEntry& e : m.entries)
      hash_total += !e.hash_known || e.drives.empty() ? 0 : m.striped() ? m.expert_bytes : e.drives.size() * m.expert_bytes;
  }
  Progress bar("doctor", hash_total, progress && full);
  std::mutex bar_mutex;
  std::atomic<uint64_t> hashed{0};
  auto hashed_more = [&](uint64_t n) {
    hashed += n;
    std::lock_guard<std::mutex> g(bar_mutex);
    bar.add(n);
  };

  for (const SpineFileEntry& s : m.spine_files) {
    const std::string path = store + "/" + s.path;
    ++r.files_checked;
    if (std::string p = size_problem(path, s.bytes); !p.empty()) {
      r.problems.push_back(cat(path, ": spine file ", p));
      continue;
    }
    try {
      File f = File::open_read(path);
      SpineHeader h = read_spine_header(f);
      if (h.format != m.spine_format)
        r.problems.push_back(cat(path, ": a ", spine_format_name(h.format), " spine file in a ",
                                 spine_format_name(m.spine_format), " store"));
    } catch (const Error& e) {
      r.problems.push_back(e.what());
      continue;
    }
    if (full) {
      if (to_hex(hash_file(path, true)) != s.sha256)
        r.problems.push_back(cat(path, ": spine file SHA-256 differs from store.json"));
      hashed_more(s.bytes);
    }
  }

  // A missing drive is one problem, not one per expert on it.
  std::vector<bool> drive_ok(m.drives.size(), true);
  for (size_t d = 0; d < m.drives.size(); ++d) {
    std::error_code ec;
    if (fs::is_directory(m.drives[d].path + "/deltafin-experts", ec)) continue;
    drive_ok[d] = false;
    uint64_t files = 0;
    for (const ExpertEntry& e : m.entries)
      for (uint16_t x : e.drives) files += x == d;
    r.problems.push_back(cat("drive ", d, " (", m.drives[d].path, "): ", m.drives[d].path,
                             "/deltafin-experts is missing; its ", files, " expert files were not checked"));
  }

  r.strays = find_strays(m, store, drive_ok);

  struct Job {
    int64_t layer, expert;
    uint16_t drive;
  };
  std::vector<Job> jobs;
  // A striped expert is one job (its SHA-256 covers all its stripes), checked
  // only when every drive is there.
  const bool all_drives = std::find(drive_ok.begin(), drive_ok.end(), false) == drive_ok.end();
  for (int64_t l = 0; l < m.layers; ++l)
    for (int64_t e = 0; e < m.experts; ++e) {
      const std::vector<uint16_t>& on = m.entry(l, e).drives;
      if (m.striped() && !on.empty() && all_drives) jobs.push_back({l, e, 0});
      if (m.striped()) continue;
      for (uint16_t d : on)
        if (drive_ok[d]) jobs.push_back({l, e, d});
    }
  // A streamed store: experts not fetched yet are simply absent; fetched ones
  // are checked against the hash recorded at their first fetch.
  std::unique_ptr<HashJournal> journal;
  if (m.remote) {
    ++r.files_checked;
    try {
      journal = std::make_unique<HashJournal>(store, m.moe_layers, m.experts, HashJournal::Mode::ReadOnly);
      for (const std::string& slot : journal->damaged())
        r.problems.push_back(cat(HashJournal::path(store), ": the slot of ", slot, " is damaged (it will be fetched again)"));
    } catch (const Error& e) {
      r.problems.push_back(e.what());
    }
    std::vector<Job> kept;
    for (const Job& j : jobs) {
      // Absent is normal whatever the hash: never fetched, or evicted under the disk budget.
      if (fs::exists(m.expert_path(j.drive, j.layer, j.expert))) kept.push_back(j);
      else ++r.not_fetched;
    }
    jobs.swap(kept);
  }
  // Every stripe's size, and with --full the record's SHA-256 over the
  // stripes in order and each stripe's CRC-32C. "" when all is right.
  auto check_striped = [&](int64_t l, int64_t x) -> std::string {
    const ExpertEntry& e = m.entry(l, x);
    std::vector<std::string> paths;
    std::string problems;
    for (size_t d = 0; d < m.drives.size(); ++d) {
      paths.push_back(m.stripe_path(static_cast<int>(d), l, x));
      if (std::string p = size_problem(paths.back(), m.stripe_bytes(static_cast<int>(d))); !p.empty())
        problems += cat(problems.empty() ? "" : "; ", "layer ", l, ", expert ", x, ", drive ", d, ": ", paths.back(), ": stripe ", p);
    }
    if (!problems.empty() || !full) return problems;
    const std::string where = cat("layer ", l, ", expert ", x, " (striped over ", m.drives.size(), " drives): ");
    try {
      std::vector<uint32_t> crcs;
      const Sha256Digest got = hash_files(paths, true, &crcs);
      hashed_more(m.expert_bytes);
      if (got != e.sha256) {
        // Which stripe is wrong: the one whose CRC-32C differs, when the recorded ones are right.
        std::string which;
        for (size_t d = 0; d < crcs.size(); ++d)
          if (crcs[d] != e.stripe_crc32c[d]) which += cat(which.empty() ? "" : ", ", "drive ", d, " (", paths[d], ")");
        return where + "SHA-256 of the stripes differs from store.json (the bytes are not the released expert)" +
               (which.empty() ? std::string() : "; stripe CRC-32C differs on " + which);
      }
      for (size_t d = 0; d < crcs.size(); ++d)
        if (crcs[d] != e.stripe_crc32c[d]) return where + cat("recorded CRC-32C of stripe ", d, " is wrong (the SHA-256 is right)");
    } catch (const Error& err) {
      return where + err.what();
    }
    return "";
  };
  std::vector<std::string> found(jobs.size());  // per job, so the report order is fixed
  ThreadPool pool(full ? std::max(1, threads) : 1);
  pool.parallel_for(jobs.size(), [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const Job& j = jobs[i];
      if (m.striped()) {
        found[i] = check_striped(j.layer, j.expert);
        continue;
      }
      const ExpertEntry& e = m.entry(j.layer, j.expert);
      const std::string path = m.expert_path(j.drive, j.layer, j.expert);
      const std::string where = cat("layer ", j.layer, ", expert ", j.expert, ", drive ", j.drive, ": ", path, ": ");
      if (std::string p = size_problem(path, m.expert_bytes); !p.empty()) {
        found[i] = where + p;
        continue;
      }
      Sha256Digest want_sha = e.sha256;
      uint32_t want_crc = e.crc32c;
      if (!e.hash_known) {
        const std::optional<ExpertHash> h = journal ? journal->get(j.layer, j.expert) : std::nullopt;
        if (!h) {
          found[i] = where + "fetched, but no hash is recorded in remote/hashes.bin (it will be fetched again)";
          continue;
        }
        want_sha = h->sha256;
        want_crc = h->crc32c;
      }
      if (!full) continue;
      uint32_t crc = 0;
      try {
        const Sha256Digest got = hash_file(path, true, &crc);
        if (got != want_sha)
          found[i] = where + (e.hash_known ? "SHA-256 differs from store.json (the bytes are not the released expert)"
                                           : "SHA-256 differs from the one recorded at its first fetch");
        else if (crc != want_crc)
          found[i] = where + "recorded CRC-32C is wrong (the file's SHA-256 is right)";
      } catch (const Error& x) {
        found[i] = where + x.what();
      }
      hashed_more(m.expert_bytes);
    }
  });
  r.files_checked += jobs.size() * (m.striped() ? m.drives.size() : 1);
  for (std::string& p : found)
    if (!p.empty()) r.problems.push_back(std::move(p));
  if (full) bar.finish();
  r.bytes_hashed += hashed;
  return r;
}

}  // namespace deltafin
