// setup --stream end to end against a real nginx (remote/mirror_server.h):
// the spine is fetched at setup, experts on first use, checked, installed
// atomically and kept within a disk budget; faults between the store and the
// mirror (through FaultProxy) are retried or refused with named errors; runs
// of a streamed store give logits equal, bit for bit, to the resident
// reference.
//
// This binary links deltafin_remote (not the engine), so model runs go
// through the deltafin binary (`logits`, `run --stats` for the fetch
// counters) and the fetcher, prefetch and setup are driven through their C++
// APIs where that is closer to the point.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "model/kimi_k3/checkpoint.h"
#include "model/kimi_k3/config.h"
#include "model/kimi_k3/family_checkpoint.h"
#include "model/kimi_k3/tensors.h"
#include "model/kimi_k3/generator.h"
#include "remote/expert_fetcher.h"
#include "remote/expert_ranges.h"
#include "remote/mirror_server.h"
#include "remote/prefetch_experts.h"
#include "remote/stream_setup.h"
#include "store/doctor.h"
#include "store/hash_journal.h"
#include "store/install.h"
#include "store/setup.h"
#include "store/store_manifest.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/file.h"
#include "util/sha256.h"

extern char** environ;

using namespace deltafin;
using namespace deltafin::test;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---------------------------------------------------------------- shared checkpoint

// One generated tiny checkpoint served as <www>/ckpt, its resident logits for
// a fixed token list (the reference every streamed run must equal), and a
// local `setup --from` store of it (for the spine hashes).
struct Shared {
  TempDir dir;
  std::string www, ckpt, tokens, resident_npy, resident;
  K3Checkpoint k;
  uint64_t expert_bytes = 0, checkpoint_bytes = 0;
  std::string local_store;
};

std::string join_ids(const std::vector<uint32_t>& ids) {
  std::string s;
  for (uint32_t t : ids) {
    if (!s.empty()) s += ',';
    s += std::to_string(t);
  }
  return s;
}

const Shared& shared() {
  static Shared* s = [] {
    auto* x = new Shared;
    x->www = x->dir.file("www");
    x->ckpt = x->www + "/ckpt";
    GenerateOptions o;
    o.out_dir = x->ckpt;
    o.seed = 7;
    o.dims = preset_dims("tiny");
    o.progress = false;
    generate_k3_checkpoint(o);
    x->k = load_k3_checkpoint(x->ckpt);
    x->expert_bytes = k3_expert_record_bytes(x->k.config);
    for (const auto& e : fs::directory_iterator(x->ckpt)) x->checkpoint_bytes += fs::file_size(e.path());
    x->tokens = join_ids(random_tokens(3, 24, static_cast<uint32_t>(x->k.config.vocab_size)));
    x->resident_npy = x->dir.file("resident.npy");
    std::string out;
    const int rc = run_command(cat(deltafin_binary(), " logits --model ", x->ckpt, " --tokens ", x->tokens, " --out ",
                                   x->resident_npy),
                               &out);
    if (rc != 0) fail("resident logits failed: ", out);
    x->resident = test::read_bytes(x->resident_npy);
    // The local reference store (bf16 spine, fixed drive speeds).
    SetupOptions so;
    so.from = x->ckpt;
    so.store = x->dir.file("local/store");
    so.drives = {x->dir.file("local/d0"), x->dir.file("local/d1")};
    for (const std::string& d : so.drives) fs::create_directories(d);
    so.spine = "bf16";
    so.drive_mbps = {2000, 2000};
    so.quiet = true;
    run_setup(so);
    x->local_store = so.store;
    return x;
  }();
  return *s;
}

HttpOptions fast_http() {
  HttpOptions h;
  h.attempts = 4;
  h.backoff_s = 0.01;
  h.backoff_max_s = 0.05;
  h.connect_timeout_s = 2;
  return h;
}

// ---------------------------------------------------------------- fault rules

// Rules count requests from `base` (the proxy's count when the rule is set),
// so the requests setup made through the proxy do not shift them.
FaultProxy::Rule first_n(size_t base, size_t k, Fault f) {
  return [=](size_t n, const std::string&) { return n >= base && n < base + k ? f : Fault::None; };
}
FaultProxy::Rule always(Fault f) {
  return [=](size_t, const std::string&) { return f; };
}
FaultProxy::Rule none() { return always(Fault::None); }

// ---------------------------------------------------------------- the store's files

// Every regular file under <drive>/deltafin-experts on the given drives.
std::vector<std::string> files_on_drives(const std::vector<std::string>& drives) {
  std::vector<std::string> out;
  for (const std::string& d : drives) {
    std::error_code ec;
    if (!fs::is_directory(d + "/deltafin-experts", ec)) continue;
    for (const auto& e : fs::recursive_directory_iterator(d + "/deltafin-experts"))
      if (e.is_regular_file()) out.push_back(e.path().string());
  }
  return out;
}

std::vector<std::string> temporaries(const std::vector<std::string>& drives) {
  std::vector<std::string> out;
  for (const std::string& f : files_on_drives(drives))
    if (f.find(".tmp-") != std::string::npos) out.push_back(f);
  return out;
}

// (layer, expert) pairs whose file is on every drive its placement names.
std::set<std::pair<int64_t, int64_t>> local_experts(const StoreManifest& m) {
  std::set<std::pair<int64_t, int64_t>> out;
  for (int64_t l = 1; l < m.layers; ++l)
    for (int64_t e = 0; e < m.experts; ++e) {
      bool all = !m.entry(l, e).drives.empty();
      for (uint16_t d : m.entry(l, e).drives) all = all && fs::exists(m.expert_path(d, l, e));
      if (all) out.insert({l, e});
    }
  return out;
}

uint64_t bytes_on_drives(const std::vector<std::string>& drives) {
  uint64_t n = 0;
  for (const std::string& f : files_on_drives(drives)) n += fs::file_size(f);
  return n;
}

struct SpineSnapshot {
  std::map<std::string, std::pair<std::string, fs::file_time_type>> files;  // path -> (sha256, mtime)
  static SpineSnapshot take(const std::string& store, const StoreManifest& m) {
    SpineSnapshot s;
    for (const SpineFileEntry& f : m.spine_files) {
      const std::string p = store + "/" + f.path;
      s.files[p] = {sha256_file_hex(p), fs::last_write_time(p)};
    }
    return s;
  }
};

// ---------------------------------------------------------------- a child process (Ctrl-C)

struct Child {
  pid_t pid = -1;
  std::string log;
};

Child spawn_cli(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> full = {deltafin_binary()};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  Child c;
  c.log = log;
  const int rc = posix_spawn(&c.pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail("posix_spawn ", argv[0], ": ", std::strerror(rc));
  return c;
}

// The exit status (or 128 + signal); kills the child after timeout_s.
int wait_child(Child& c, double timeout_s) {
  const auto t0 = Clock::now();
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) break;
    if (since(t0) > timeout_s) {
      ADD_FAILURE() << "child did not exit within " << timeout_s << " s; killing it";
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  c.pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// nginx's request count once it stops moving (it logs a request just after
// the reply has gone out).
size_t settled_requests(const NginxMirror& n) {
  size_t last = n.requests_logged();
  int stable = 0;
  for (int i = 0; i < 200 && stable < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const size_t now = n.requests_logged();
    stable = now == last ? stable + 1 : 0;
    last = now;
  }
  return last;
}

// ---------------------------------------------------------------- "mirror:" line of run --stats

struct MirrorLine {
  bool found = false;
  uint64_t fetched = 0, retries = 0, refused = 0, failed = 0, evicted = 0, not_kept = 0;
};

MirrorLine parse_mirror_line(const std::string& out) {
  static const std::regex re(
      "mirror: ([0-9]+) experts fetched, .* ([0-9]+) retries, ([0-9]+) refused copies, ([0-9]+) failed, ([0-9]+) "
      "evicted \\([^)]*\\), ([0-9]+) not kept");
  std::smatch m;
  MirrorLine r;
  if (!std::regex_search(out, m, re)) return r;
  r.found = true;
  r.fetched = std::stoull(m[1]);
  r.retries = std::stoull(m[2]);
  r.refused = std::stoull(m[3]);
  r.failed = std::stoull(m[4]);
  r.evicted = std::stoull(m[5]);
  r.not_kept = std::stoull(m[6]);
  return r;
}

// ---------------------------------------------------------------- the fixture

class StreamStore : public ::testing::Test {
protected:
  void SetUp() override {
    if (!nginx_available()) {
      if (::deltafin::test::under_ci()) FAIL() << "nginx (/usr/sbin/nginx) is missing under CI: apt-get install nginx";
      GTEST_SKIP() << "\n*** SKIPPED: nginx (/usr/sbin/nginx) is missing (scripts/install-deps.sh installs it)"
                   << "\n*** setup --stream has NOT been checked against a real mirror\n";
    }
    shared();  // generated before the clock of the first test's work starts mattering
    nginx_ = std::make_unique<NginxMirror>(shared().www);
    drives_ = {root_.file("d0"), root_.file("d1")};
    for (const std::string& d : drives_) fs::create_directories(d);
    store_ = root_.file("store");
  }

  std::string mirror_url() const { return nginx_->url() + "/ckpt"; }

  // A proxy in front of nginx; the store set up through it then fetches through it.
  FaultProxy& start_proxy() {
    proxy_ = std::make_unique<FaultProxy>(nginx_->port(), none());
    return *proxy_;
  }
  std::string proxy_url() const { return proxy_->url() + "/ckpt"; }
  void set_proxy_rule_first(size_t k, Fault f) { proxy_->set_rule(first_n(proxy_->requests(), k, f)); }

  StreamSetupOptions stream_options(const std::string& url) const {
    StreamSetupOptions so;
    so.setup.store = store_;
    so.setup.drives = drives_;
    so.setup.spine = "bf16";
    so.setup.drive_mbps = {2000, 2000};
    so.setup.quiet = true;
    so.source_url = url;
    so.fetch.http = fast_http();
    return so;
  }
  StreamSetupReport stream_setup(const std::string& url) { return run_stream_setup(stream_options(url)); }

  FetchOptions fetch_options() const {
    FetchOptions fo;
    fo.threads = 2;
    fo.http = fast_http();
    fo.matrices = mxfp4_matrices(k3_record_layout(shared().k.config));
    return fo;
  }

  // One fetch, waited for; `buf` gets the bytes.
  static ReadResult fetch_one(ExpertFetcher& f, int64_t layer, int64_t expert, std::vector<uint8_t>& buf) {
    buf.assign(shared().expert_bytes, 0);
    std::promise<ReadResult> done;
    std::future<ReadResult> result = done.get_future();
    FetchRequest r;
    r.layer = layer;
    r.expert = expert;
    r.dest = buf.data();
    r.on_done = [&done](const ReadResult& res) { done.set_value(res); };
    f.submit(std::move(r));
    return result.get();
  }

  static void expect_record(const std::vector<uint8_t>& buf, int64_t layer, int64_t expert) {
    const std::vector<uint8_t> want = shared().k.read_expert_record(layer, expert);
    ASSERT_EQ(buf.size(), want.size());
    EXPECT_EQ(std::memcmp(buf.data(), want.data(), want.size()), 0)
        << "layer " << layer << " expert " << expert << ": fetched bytes differ from the checkpoint's record";
  }

  std::string cli(const std::string& args) const { return cat(deltafin_binary(), " ", args); }

  // `deltafin logits` of the store (the working-set-only cache, so experts are
  // read again and again); the .npy bytes, or "" with the output on failure.
  int store_logits(const std::string& extra, std::string* out, std::string* npy) {
    const std::string file = root_.file(cat("logits-", ++runs_, ".npy"));
    const int rc = run_command(cli(cat("logits --store ", store_, " --tokens ", shared().tokens, " --out ", file,
                                       " --cache-gb 0 ", extra)),
                               out);
    *npy = rc == 0 ? test::read_bytes(file) : std::string();
    return rc;
  }
  void expect_identical_logits(const std::string& extra) {
    std::string out, npy;
    ASSERT_EQ(store_logits(extra, &out, &npy), 0) << out;
    ASSERT_EQ(npy.size(), shared().resident.size()) << out;
    EXPECT_EQ(std::memcmp(npy.data(), shared().resident.data(), npy.size()), 0)
        << "streamed logits (" << extra << ") differ from the resident ones\n"
        << out;
  }
  // `deltafin run --stats` over the same tokens (prefill + 1 token): the fetch counters.
  MirrorLine store_run_stats(const std::string& extra, std::string* out) {
    const int rc = run_command(cli(cat("run --store ", store_, " --prompt-ids ", shared().tokens,
                                       " --max-new 1 --ignore-eos --stats --cache-gb 0 ", extra)),
                               out);
    EXPECT_EQ(rc, 0) << *out;
    const MirrorLine m = parse_mirror_line(*out);
    EXPECT_TRUE(m.found) << *out;
    return m;
  }

  TempDir root_;
  std::unique_ptr<NginxMirror> nginx_;
  std::unique_ptr<FaultProxy> proxy_;
  std::vector<std::string> drives_;
  std::string store_;
  int runs_ = 0;
};

// ---------------------------------------------------------------- a. setup --stream

TEST_F(StreamStore, SetupFetchesOnlyTheSpine) {
  const StreamSetupReport r = stream_setup(mirror_url());
  const StoreManifest m = load_store_manifest(store_);
  const StoreManifest local = load_store_manifest(shared().local_store);

  // The spine is the one a local setup writes, byte for byte (store.json's
  // hashes, and the files' actual hashes).
  ASSERT_EQ(m.spine_files.size(), local.spine_files.size());
  for (size_t i = 0; i < m.spine_files.size(); ++i) {
    SCOPED_TRACE(m.spine_files[i].path);
    EXPECT_EQ(m.spine_files[i].path, local.spine_files[i].path);
    EXPECT_EQ(m.spine_files[i].bytes, local.spine_files[i].bytes);
    EXPECT_EQ(m.spine_files[i].sha256, local.spine_files[i].sha256);
    EXPECT_EQ(sha256_file_hex(store_ + "/" + m.spine_files[i].path), m.spine_files[i].sha256);
  }
  EXPECT_EQ(m.spine_format, SpineFormat::BF16);
  EXPECT_EQ(m.spine_bytes, local.spine_bytes);
  EXPECT_EQ(m.expert_bytes, shared().expert_bytes);

  // The remote section: the URL, every shard with its size and nginx's ETag
  // ("<mtime hex>-<size hex>", quoted).
  ASSERT_TRUE(m.remote.has_value());
  EXPECT_EQ(m.remote->url, mirror_url());
  EXPECT_EQ(m.remote->checksums, "");
  EXPECT_EQ(m.remote->disk_budget_bytes, 0u);
  std::vector<std::string> shard_files;
  for (const auto& e : fs::directory_iterator(shared().ckpt))
    if (e.path().extension() == ".safetensors") shard_files.push_back(e.path().filename().string());
  std::sort(shard_files.begin(), shard_files.end());
  ASSERT_GE(shard_files.size(), 2u);
  std::vector<std::string> listed;
  for (const RemoteFile& f : m.remote->shards) {
    SCOPED_TRACE(f.name);
    listed.push_back(f.name);
    EXPECT_EQ(f.bytes, fs::file_size(shared().ckpt + "/" + f.name));
    ASSERT_GE(f.etag.size(), 2u);
    EXPECT_EQ(f.etag.front(), '"');
    EXPECT_EQ(f.etag.back(), '"');
    char size_hex[32];
    std::snprintf(size_hex, sizeof size_hex, "-%llx\"", static_cast<unsigned long long>(f.bytes));
    EXPECT_NE(f.etag.find(size_hex), std::string::npos) << f.etag;
    EXPECT_EQ(f.sha256, "");
  }
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, shard_files);

  // Every placement is remote: drives named, hash not known yet.
  for (int64_t l = 0; l < m.layers; ++l)
    for (int64_t e = 0; e < m.experts; ++e) {
      const ExpertEntry& x = m.entry(l, e);
      if (l == 0) {
        EXPECT_TRUE(x.drives.empty());
        continue;
      }
      EXPECT_FALSE(x.drives.empty()) << l << "/" << e;
      EXPECT_FALSE(x.hash_known) << l << "/" << e;
    }
  EXPECT_TRUE(file_exists(ExpertRanges::path(store_)));
  ASSERT_NO_THROW(ExpertRanges::load(store_, m));

  // What moved: less than the checkpoint. nginx's log and the report agree.
  ASSERT_TRUE(nginx_->wait_logged(r.requests));
  const uint64_t logged = nginx_->body_bytes_logged();
  const std::string moved = cat("setup --stream moved ", r.fetched_bytes, " bytes (nginx logged ", logged, " in ",
                                nginx_->requests_logged(), " requests) of a ", shared().checkpoint_bytes,
                                "-byte checkpoint (report: ", r.checkpoint_bytes, ")");
  SCOPED_TRACE(moved);
  std::printf("%s\n", moved.c_str());
  EXPECT_EQ(r.checkpoint_bytes, shared().checkpoint_bytes);
  EXPECT_EQ(logged, r.fetched_bytes);
  EXPECT_LT(logged, shared().checkpoint_bytes);
  // At least the experts were left behind.
  const uint64_t experts_total = static_cast<uint64_t>((m.layers - 1) * m.experts) * m.expert_bytes;
  EXPECT_LE(logged + experts_total, shared().checkpoint_bytes + 4096);

  // No expert was fetched: nothing on the drives.
  EXPECT_TRUE(files_on_drives(drives_).empty());
  const DoctorReport d = run_doctor(store_, true);
  EXPECT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems[0]);
  EXPECT_EQ(d.not_fetched, static_cast<uint64_t>((m.layers - 1) * m.experts));
}

// ---------------------------------------------------------------- b. bit identity

TEST_F(StreamStore, LogitsEqualResidentAndSecondRunFetchesNothing) {
  stream_setup(mirror_url());
  expect_identical_logits("--fetch-threads 1");
  const size_t fetched = local_experts(load_store_manifest(store_)).size();
  EXPECT_GT(fetched, 0u);
  const size_t requests = settled_requests(*nginx_);

  // Again: everything it needs is on the drives. (Without lookahead: a
  // prediction may name an expert the first run never needed, and reading
  // it would be a fetch; what must not be fetched is what was needed.)
  expect_identical_logits("--fetch-threads 1 --lookahead off");
  EXPECT_EQ(settled_requests(*nginx_), requests);
  EXPECT_EQ(local_experts(load_store_manifest(store_)).size(), fetched);
  // The engine's own counters: a run over the same prompt, twice (the first
  // may fetch the experts of the generated token).
  std::string out;
  store_run_stats("--fetch-threads 1", &out);
  const MirrorLine second = store_run_stats("--fetch-threads 1 --lookahead off", &out);
  EXPECT_EQ(second.fetched, 0u) << out;
  EXPECT_EQ(second.failed, 0u) << out;
  EXPECT_TRUE(temporaries(drives_).empty());
}

TEST_F(StreamStore, LogitsEqualResidentWithTwoFetchThreads) {
  stream_setup(mirror_url());
  expect_identical_logits("--fetch-threads 2");
  expect_identical_logits("--fetch-threads 2 --lookahead off");
  EXPECT_TRUE(temporaries(drives_).empty());
  const DoctorReport d = run_doctor(store_, true);
  EXPECT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems[0]);
}

// ---------------------------------------------------------------- c. disk budget

TEST_F(StreamStore, DiskBudgetEvictsAndRunsStayIdentical) {
  stream_setup(mirror_url());
  StoreManifest m = load_store_manifest(store_);
  const SpineSnapshot before = SpineSnapshot::take(store_, m);
  // Room for 6 experts (each expert has one placement drive here).
  for (int64_t l = 1; l < m.layers; ++l)
    for (int64_t e = 0; e < m.experts; ++e) ASSERT_EQ(m.entry(l, e).drives.size(), 1u);
  const uint64_t budget = 6 * m.expert_bytes + m.expert_bytes / 2;
  char gb[64];
  std::snprintf(gb, sizeof gb, "%.12f", static_cast<double>(budget) / 1e9);
  SCOPED_TRACE(cat("disk budget ", budget, " bytes = ", gb, " GB; expert ", m.expert_bytes, " bytes"));

  expect_identical_logits(cat("--disk-budget ", gb));
  EXPECT_LE(bytes_on_drives(drives_), budget);
  EXPECT_LE(files_on_drives(drives_).size(), 6u);
  std::string out;
  const MirrorLine s = store_run_stats(cat("--disk-budget ", gb), &out);
  EXPECT_GT(s.evicted, 0u) << out;
  EXPECT_GT(s.fetched, 6u) << out;
  EXPECT_EQ(s.failed, 0u) << out;
  EXPECT_LE(bytes_on_drives(drives_), budget);
  expect_identical_logits(cat("--disk-budget ", gb, " --fetch-threads 1"));
  EXPECT_LE(bytes_on_drives(drives_), budget);
  EXPECT_TRUE(temporaries(drives_).empty());

  // The spine was never touched.
  const SpineSnapshot after = SpineSnapshot::take(store_, load_store_manifest(store_));
  EXPECT_EQ(after.files, before.files);
  // And what is left is sound.
  const DoctorReport d = run_doctor(store_, true);
  EXPECT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems[0]);
}

// The fetcher alone under a 3-expert budget: every fetched record is right,
// the drives never hold more than the budget, a held expert is never evicted,
// and when every local expert is held the bytes are used but not kept.
TEST_F(StreamStore, FetcherBudgetEvictsColdestButNeverAHeldOne) {
  stream_setup(mirror_url());
  const StoreManifest m = load_store_manifest(store_);
  FetchOptions fo = fetch_options();
  fo.threads = 1;
  fo.disk_budget_bytes = 3 * m.expert_bytes;
  ExpertFetcher f(store_, m, fo);
  EXPECT_EQ(f.disk_budget_bytes(), 3 * m.expert_bytes);
  std::vector<uint8_t> buf;
  ASSERT_TRUE(fetch_one(f, 1, 0, buf).ok);
  expect_record(buf, 1, 0);
  ASSERT_TRUE(f.hold_local(1, 0));
  uint64_t peak = 0;
  for (int64_t l = 1; l < m.layers; ++l)
    for (int64_t e = 0; e < m.experts; e += 5) {
      const ReadResult r = fetch_one(f, l, e, buf);
      ASSERT_TRUE(r.ok) << r.error;
      expect_record(buf, l, e);
      peak = std::max(peak, bytes_on_drives(drives_));
      EXPECT_LE(f.disk_used_bytes(), 3 * m.expert_bytes);
      EXPECT_TRUE(f.is_local(1, 0)) << "the held expert was evicted";
    }
  EXPECT_LE(peak, 3 * m.expert_bytes);
  EXPECT_TRUE(fs::exists(m.expert_path(m.entry(1, 0).drives[0], 1, 0)));
  FetchCounters c = f.counters();
  EXPECT_GT(c.evicted, 0u);
  EXPECT_EQ(c.evicted_bytes, c.evicted * m.expert_bytes);
  EXPECT_EQ(c.failed, 0u);
  EXPECT_LE(f.local_experts(), 3u);

  // Hold every local expert: the next fetch is used but not kept.
  std::vector<std::pair<int64_t, int64_t>> held;
  for (int64_t l = 1; l < m.layers; ++l)
    for (int64_t e = 0; e < m.experts; ++e)
      if (!(l == 1 && e == 0) && f.hold_local(l, e)) held.push_back({l, e});
  ASSERT_EQ(held.size() + 1, f.local_experts());
  const auto locals_before = local_experts(m);
  ASSERT_FALSE(f.is_local(9, 14));
  const ReadResult r = fetch_one(f, 9, 14, buf);
  ASSERT_TRUE(r.ok) << r.error;
  expect_record(buf, 9, 14);
  EXPECT_FALSE(f.is_local(9, 14));
  EXPECT_EQ(f.counters().not_kept, c.not_kept + 1);
  EXPECT_EQ(local_experts(m), locals_before);
  for (const auto& [l, e] : held) f.release_local(l, e);
  f.release_local(1, 0);
  EXPECT_FAILS_WITH(f.release_local(1, 0), "release_local without hold");
  EXPECT_TRUE(temporaries(drives_).empty());
}

// The fetcher holds the store's lock shared while it installs (store/install.h):
// while a setup holds it, a fetched expert is used but nothing is written or
// evicted, so the setup's sweep never meets a live fetcher's temporary; and
// the hash journal is not created then either.
TEST_F(StreamStore, FetcherWritesNothingWhileASetupHoldsTheStore) {
  stream_setup(mirror_url());
  const StoreManifest m = load_store_manifest(store_);
  {
    const StoreLock setup(store_);
    EXPECT_FAILS_WITH(ExpertFetcher(store_, m, fetch_options()), "remote/hashes.bin", "setup.lock");
  }
  ExpertFetcher f(store_, m, fetch_options());  // creates the journal
  std::vector<uint8_t> buf;
  {
    const StoreLock setup(store_);
    const ReadResult r = fetch_one(f, 1, 0, buf);
    ASSERT_TRUE(r.ok) << r.error;
    expect_record(buf, 1, 0);
    EXPECT_FALSE(f.is_local(1, 0));
    const FetchCounters c = f.counters();
    EXPECT_EQ(c.not_kept, 1u);
    EXPECT_EQ(c.install_failed, 1u);
    EXPECT_NE(c.last_install_error.find("a deltafin setup is rewriting the store"), std::string::npos)
        << c.last_install_error;
    EXPECT_NE(c.last_install_error.find("setup.lock"), std::string::npos) << c.last_install_error;
    EXPECT_EQ(bytes_on_drives(drives_), 0u);
    EXPECT_TRUE(temporaries(drives_).empty());
  }
  ASSERT_TRUE(fetch_one(f, 1, 0, buf).ok);
  EXPECT_TRUE(f.is_local(1, 0));
  EXPECT_EQ(f.counters().not_kept, 1u);
}

// ---------------------------------------------------------------- d. faults between store and mirror

TEST_F(StreamStore, Transient500sAreRetried) {
  start_proxy();
  stream_setup(proxy_url());
  const StoreManifest m = load_store_manifest(store_);
  EXPECT_EQ(m.remote->url, proxy_url());
  {
    set_proxy_rule_first(2, Fault::Status500);
    ExpertFetcher f(store_, m, fetch_options());
    std::vector<uint8_t> buf;
    const ReadResult r = fetch_one(f, 2, 3, buf);
    ASSERT_TRUE(r.ok) << r.error;
    expect_record(buf, 2, 3);
    EXPECT_EQ(f.counters().retries, 2u);
    EXPECT_EQ(f.counters().fetched, 1u);
    EXPECT_EQ(f.counters().failed, 0u);
  }
  // A whole run: identical, and the engine counts the retries.
  set_proxy_rule_first(2, Fault::Status500);
  expect_identical_logits("");
  set_proxy_rule_first(2, Fault::Status500);
  std::string out;
  fs::remove_all(drives_[0] + "/deltafin-experts");
  fs::remove_all(drives_[1] + "/deltafin-experts");
  const MirrorLine s = store_run_stats("", &out);
  EXPECT_EQ(s.retries, 2u) << out;
  EXPECT_EQ(s.failed, 0u) << out;
  EXPECT_GT(s.fetched, 0u) << out;
}

TEST_F(StreamStore, MirrorAlways500FailsNamingLayerExpertAndUrl) {
  start_proxy();
  stream_setup(proxy_url());
  const StoreManifest m = load_store_manifest(store_);
  proxy_->set_rule(always(Fault::Status500));
  {
    FetchOptions fo = fetch_options();
    fo.http.attempts = 2;
    ExpertFetcher f(store_, m, fo);
    std::vector<uint8_t> buf;
    const ReadResult r = fetch_one(f, 3, 5, buf);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("layer 3 expert 5"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find(proxy_url()), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("500"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("gave up after 2 attempts"), std::string::npos) << r.error;
    EXPECT_FALSE(f.is_local(3, 5));
    EXPECT_FALSE(f.hash(3, 5).has_value());
    EXPECT_EQ(f.counters().failed, 1u);
    EXPECT_EQ(f.counters().fetched, 0u);
  }
  EXPECT_FALSE(fs::exists(m.expert_path(m.entry(3, 5).drives[0], 3, 5)));
  EXPECT_FALSE(HashJournal(store_, m.layers, m.experts).get(3, 5).has_value());

  // Through a run (one token, no lookahead: 4 demand fetches, all failing).
  std::string out;
  const int rc = run_command(cli(cat("logits --store ", store_, " --tokens 5 --out ", root_.file("x.npy"),
                                     " --cache-gb 0 --lookahead off")),
                             &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("layer 1 expert [0-9]+ from " + proxy_url()))) << out;
  EXPECT_NE(out.find("500"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(root_.file("x.npy")));
  EXPECT_TRUE(files_on_drives(drives_).empty());
}

TEST_F(StreamStore, BrokenRepliesOnceAreRetried) {
  start_proxy();
  stream_setup(proxy_url());
  const StoreManifest m = load_store_manifest(store_);
  {
    const ExpertRanges ranges = ExpertRanges::load(store_, m);
    ExpertFetcher f(store_, m, fetch_options());
    std::vector<uint8_t> buf;
    int64_t e = 0;
    for (Fault fault : {Fault::Truncate, Fault::WrongLength, Fault::Drop, Fault::LongBody, Fault::ShiftedRange}) {
      SCOPED_TRACE(cat("fault ", static_cast<int>(fault), ", layer 4 expert ", e));
      const uint64_t retries = f.counters().retries;
      set_proxy_rule_first(1, fault);
      const size_t before = proxy_->requests();
      const ReadResult r = fetch_one(f, 4, e, buf);
      ASSERT_TRUE(r.ok) << r.error;
      expect_record(buf, 4, e);
      // The broken reply and one good one more than the expert's requests.
      EXPECT_EQ(proxy_->requests() - before, ranges.requests(4, e).size() + 1);
      // A connection closed without a reply (Drop) on a kept-alive
      // connection is sent again by libcurl itself, on a fresh connection,
      // before the client sees a failure: no retry of ours then.
      if (fault == Fault::Drop) EXPECT_LE(f.counters().retries, retries + 1);
      else EXPECT_EQ(f.counters().retries, retries + 1);
      ++e;
    }
    EXPECT_EQ(f.counters().refused, 0u);
  }
  // A run with a truncated and a short reply on the way: identical.
  proxy_->set_rule([base = proxy_->requests()](size_t n, const std::string&) {
    return n == base ? Fault::Truncate : n == base + 1 ? Fault::WrongLength : Fault::None;
  });
  expect_identical_logits("");
  EXPECT_TRUE(temporaries(drives_).empty());
}

// A server that answers a range request with the whole file (200) is not a
// transient fault: not retried, named.
TEST_F(StreamStore, IgnoredRangeIsNotRetried) {
  start_proxy();
  stream_setup(proxy_url());
  const StoreManifest m = load_store_manifest(store_);
  ExpertFetcher f(store_, m, fetch_options());
  set_proxy_rule_first(1, Fault::IgnoreRange);
  std::vector<uint8_t> buf;
  const ReadResult r = fetch_one(f, 6, 1, buf);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("layer 6 expert 1"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("ignored the byte range"), std::string::npos) << r.error;
  EXPECT_EQ(f.counters().retries, 0u);
  EXPECT_FALSE(f.is_local(6, 1));
  EXPECT_TRUE(files_on_drives(drives_).empty());
  // The next request is answered properly: a later fetch works.
  const ReadResult again = fetch_one(f, 6, 1, buf);
  ASSERT_TRUE(again.ok) << again.error;
  expect_record(buf, 6, 1);
}

// The mirror moved (another port): setup --stream again over the same store
// keeps what was fetched and its hashes; nothing is fetched again.
TEST_F(StreamStore, SetupStreamAgainKeepsFetchedExperts) {
  stream_setup(mirror_url());
  {
    const StoreManifest m = load_store_manifest(store_);
    prefetch_experts(store_, m, PrefetchRange{1, 3}, fetch_options(), true);
  }
  const auto before = local_experts(load_store_manifest(store_));
  ASSERT_EQ(before.size(), 48u);
  nginx_ = std::make_unique<NginxMirror>(shared().www);  // another port
  stream_setup(mirror_url());
  const StoreManifest m = load_store_manifest(store_);
  EXPECT_EQ(m.remote->url, mirror_url());
  EXPECT_EQ(local_experts(m), before);
  ExpertFetcher f(store_, m, fetch_options());
  EXPECT_EQ(f.local_experts(), 48u);
  EXPECT_TRUE(f.is_local(2, 9));
  std::vector<uint8_t> buf;
  const ReadResult r = fetch_one(f, 4, 4, buf);
  ASSERT_TRUE(r.ok) << r.error;
  expect_record(buf, 4, 4);
  const DoctorReport d = run_doctor(store_, true);
  EXPECT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems[0]);
}

TEST_F(StreamStore, StalledMirrorTimesOutAndIsRetried) {
  start_proxy();
  stream_setup(proxy_url());
  const StoreManifest m = load_store_manifest(store_);
  proxy_->stall_s = 8;
  FetchOptions fo = fetch_options();
  fo.http.low_speed_time_s = 1;
  fo.http.low_speed_bytes_per_s = 1024;
  ExpertFetcher f(store_, m, fo);
  set_proxy_rule_first(1, Fault::Stall);
  std::vector<uint8_t> buf;
  const auto t0 = Clock::now();
  const ReadResult r = fetch_one(f, 5, 6, buf);
  const double took = since(t0);
  ASSERT_TRUE(r.ok) << r.error;
  expect_record(buf, 5, 6);
  EXPECT_EQ(f.counters().retries, 1u);
  EXPECT_LT(took, 6.0) << "the stall should end by the low-speed timeout, not by the proxy closing";
  std::printf("stalled fetch took %.2f s\n", took);
}

TEST_F(StreamStore, WrongBytesOnRefetchAreRefusedAgainstTheRecordedHash) {
  start_proxy();
  stream_setup(proxy_url());
  const StoreManifest m = load_store_manifest(store_);
  const std::string file = m.expert_path(m.entry(2, 4).drives[0], 2, 4);
  ExpertHash first;
  {
    ExpertFetcher f(store_, m, fetch_options());
    std::vector<uint8_t> buf;
    ASSERT_TRUE(fetch_one(f, 2, 4, buf).ok);
    expect_record(buf, 2, 4);
    ASSERT_TRUE(f.hash(2, 4).has_value());
    first = *f.hash(2, 4);
  }
  const std::vector<uint8_t> record = shared().k.read_expert_record(2, 4);
  EXPECT_EQ(first.sha256, sha256(record.data(), record.size()));
  ASSERT_TRUE(fs::exists(file));
  fs::remove(file);  // as an eviction would; the journal keeps the hash

  proxy_->set_rule(always(Fault::WrongBytes));
  {
    ExpertFetcher f(store_, m, fetch_options());
    EXPECT_FALSE(f.is_local(2, 4));
    std::vector<uint8_t> buf;
    const ReadResult r = fetch_one(f, 2, 4, buf);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("layer 2 expert 4"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find(to_hex(first.sha256)), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("recorded"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("nothing was installed"), std::string::npos) << r.error;
    EXPECT_EQ(f.counters().refused, 3u);
    EXPECT_EQ(f.counters().failed, 1u);
    EXPECT_FALSE(f.is_local(2, 4));
  }
  EXPECT_FALSE(fs::exists(file));
  EXPECT_TRUE(temporaries(drives_).empty());
  {
    HashJournal j(store_, m.layers, m.experts);
    ASSERT_TRUE(j.get(2, 4).has_value());
    EXPECT_EQ(j.get(2, 4)->sha256, first.sha256);
    EXPECT_EQ(j.get(2, 4)->crc32c, first.crc32c);
    EXPECT_TRUE(j.damaged().empty());
  }
  // Once only: the second copy is right, so the fetch succeeds.
  set_proxy_rule_first(1, Fault::WrongBytes);
  {
    ExpertFetcher f(store_, m, fetch_options());
    std::vector<uint8_t> buf;
    const ReadResult r = fetch_one(f, 2, 4, buf);
    ASSERT_TRUE(r.ok) << r.error;
    expect_record(buf, 2, 4);
    EXPECT_EQ(f.counters().refused, 1u);
  }
  EXPECT_TRUE(fs::exists(file));
  const DoctorReport d = run_doctor(store_, true);
  EXPECT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems[0]);
}

TEST_F(StreamStore, MirrorDown) {
  stream_setup(mirror_url());
  const StoreManifest m = load_store_manifest(store_);
  FetchOptions fo = fetch_options();
  prefetch_experts(store_, m, PrefetchRange{}, fo, true);
  ASSERT_EQ(local_experts(m).size(), static_cast<size_t>((m.layers - 1) * m.experts));
  const std::string url = mirror_url();
  nginx_.reset();  // the mirror is gone

  // Everything local: the run works without it.
  expect_identical_logits("");

  // An expert not local: a named error.
  for (int64_t e = 0; e < m.experts; ++e) fs::remove(m.expert_path(m.entry(5, e).drives[0], 5, e));
  {
    fo.http.attempts = 2;
    ExpertFetcher f(store_, m, fo);
    EXPECT_TRUE(f.hold_local(4, 1));  // local ones are still readable
    f.release_local(4, 1);
    std::vector<uint8_t> buf;
    const ReadResult r = fetch_one(f, 5, 2, buf);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("layer 5 expert 2"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find(url), std::string::npos) << r.error;
  }
  // One token, no lookahead: layer 5's 4 demand fetches run at once and all fail.
  std::string out;
  EXPECT_EQ(run_command(cli(cat("logits --store ", store_, " --tokens 5 --out ", root_.file("x.npy"),
                                " --cache-gb 0 --lookahead off")),
                        &out),
            1)
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("layer 5 expert [0-9]+ from " + url))) << out;
  EXPECT_NE(out.find("gave up after"), std::string::npos) << out;
  EXPECT_TRUE(temporaries(drives_).empty());
}

// A hash slot torn by a crash: reported, the expert counts as not fetched,
// and the next fetch records it afresh.
TEST_F(StreamStore, TornHashSlotIsReportedAndFetchedAgain) {
  stream_setup(mirror_url());
  const StoreManifest m = load_store_manifest(store_);
  prefetch_experts(store_, m, PrefetchRange{1, 1}, fetch_options(), true);
  const std::string journal = HashJournal::path(store_);
  std::string bytes = test::read_bytes(journal);
  bytes[3 * 48 + 12] ^= 0x20;  // layer 1, expert 3: inside its sha256
  write_bytes(journal, bytes);

  DoctorReport d = run_doctor(store_, false);
  std::string all;
  for (const std::string& p : d.problems) all += p + "\n";
  EXPECT_EQ(d.problems.size(), 2u) << all;
  EXPECT_NE(all.find("the slot of layer 1 expert 3 is damaged"), std::string::npos) << all;
  EXPECT_NE(all.find("L001/E003.bin: fetched, but no hash is recorded"), std::string::npos) << all;
  {
    ExpertFetcher f(store_, m, fetch_options());
    ASSERT_EQ(f.damaged_hash_slots().size(), 1u);
    EXPECT_EQ(f.damaged_hash_slots()[0], "layer 1 expert 3");
    EXPECT_FALSE(f.is_local(1, 3));
    EXPECT_TRUE(f.is_local(1, 4));
    EXPECT_EQ(f.local_experts(), 15u);
    std::vector<uint8_t> buf;
    const ReadResult r = fetch_one(f, 1, 3, buf);
    ASSERT_TRUE(r.ok) << r.error;
    expect_record(buf, 1, 3);
    EXPECT_TRUE(f.is_local(1, 3));
  }
  d = run_doctor(store_, true);
  EXPECT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems[0]);
}

// ---------------------------------------------------------------- e. deltafin prefetch

TEST_F(StreamStore, PrefetchLayersThenAllThenDoctor) {
  stream_setup(mirror_url());
  const StoreManifest m = load_store_manifest(store_);
  std::string out;
  ASSERT_EQ(run_command(cli(cat("prefetch --store ", store_, " --layers 1-2 --quiet")), &out), 0) << out;
  EXPECT_NE(out.find("prefetch: 32 experts fetched, 0 already on the drives"), std::string::npos) << out;
  std::set<std::pair<int64_t, int64_t>> want;
  for (int64_t l = 1; l <= 2; ++l)
    for (int64_t e = 0; e < m.experts; ++e) want.insert({l, e});
  EXPECT_EQ(local_experts(m), want);
  EXPECT_EQ(files_on_drives(drives_).size(), want.size());
  // Each file is the record.
  for (const auto& [l, e] : want) {
    const std::string bytes = test::read_bytes(m.expert_path(m.entry(l, e).drives[0], l, e));
    const std::vector<uint8_t> rec = shared().k.read_expert_record(l, e);
    EXPECT_TRUE(bytes.size() == rec.size() && std::memcmp(bytes.data(), rec.data(), rec.size()) == 0) << l << "/" << e;
  }
  {
    HashJournal j(store_, m.layers, m.experts);
    EXPECT_EQ(j.known(), want.size());
  }

  ASSERT_EQ(run_command(cli(cat("prefetch --store ", store_, " --all --quiet --fetch-threads 2")), &out), 0) << out;
  EXPECT_NE(out.find("prefetch: 112 experts fetched, 32 already on the drives"), std::string::npos) << out;
  EXPECT_EQ(local_experts(m).size(), static_cast<size_t>((m.layers - 1) * m.experts));
  ASSERT_EQ(run_command(cli(cat("prefetch --store ", store_, " --all --quiet")), &out), 0) << out;
  EXPECT_NE(out.find("prefetch: 0 experts fetched, 144 already on the drives"), std::string::npos) << out;

  ASSERT_EQ(run_command(cli(cat("doctor --full --quiet --store ", store_)), &out), 0) << out;
  EXPECT_NE(out.find(", 0 problems: the store is OK"), std::string::npos) << out;
  EXPECT_EQ(out.find("not fetched"), std::string::npos) << out;

  // A damaged fetched expert is found against its recorded hash.
  const std::string victim = m.expert_path(m.entry(7, 3).drives[0], 7, 3);
  std::string bytes = test::read_bytes(victim);
  bytes[100] ^= 1;
  write_bytes(victim, bytes);
  const DoctorReport d = run_doctor(store_, true);
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_NE(d.problems[0].find("layer 7, expert 3"), std::string::npos) << d.problems[0];
  EXPECT_NE(d.problems[0].find("recorded at its first fetch"), std::string::npos) << d.problems[0];

  // Refusals.
  EXPECT_EQ(run_command(cli(cat("prefetch --store ", shared().local_store, " --all")), &out), 1) << out;
  EXPECT_NE(out.find("not a streamed store"), std::string::npos) << out;
  EXPECT_NE(run_command(cli(cat("prefetch --store ", store_, " --layers 0")), &out), 0) << out;
  EXPECT_NE(out.find("0-0 is not within the MoE layers 1-9"), std::string::npos) << out;  // K3's layer 0 is dense
  EXPECT_NE(run_command(cli(cat("prefetch --store ", store_, " --layers 2-10")), &out), 0) << out;
  EXPECT_NE(out.find("1-9"), std::string::npos) << out;
  EXPECT_NE(run_command(cli(cat("prefetch --store ", store_)), &out), 0) << out;
  EXPECT_NE(out.find("--all or --layers"), std::string::npos) << out;
}

// A disk budget smaller than the layers asked for: refused before fetching.
TEST_F(StreamStore, PrefetchRefusesMoreThanTheBudget) {
  StreamSetupOptions so = stream_options(mirror_url());
  so.disk_budget_bytes = 10 * shared().expert_bytes;
  run_stream_setup(so);
  const StoreManifest m = load_store_manifest(store_);
  EXPECT_EQ(m.remote->disk_budget_bytes, 10 * shared().expert_bytes);
  EXPECT_FAILS_WITH(prefetch_experts(store_, m, PrefetchRange{1, 1}, fetch_options(), true), "disk budget",
                    "layers 1-1");
  EXPECT_TRUE(files_on_drives(drives_).empty());
}

// ---------------------------------------------------------------- f. Ctrl-C

TEST_F(StreamStore, CtrlCDuringPrefetchLeavesASoundStoreAndResumes) {
  start_proxy();
  stream_setup(proxy_url());
  const StoreManifest m = load_store_manifest(store_);
  // Every request is held back 300 ms before the proxy forwards it: the
  // prefetch crawls (144 experts over 4 connections take ~11 s), so Ctrl-C
  // lands mid-way, and the fetches in flight end soon after it.
  proxy_->set_rule([](size_t, const std::string&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return Fault::None;
  });
  Child c = spawn_cli({"prefetch", "--store", store_, "--all", "--quiet"}, root_.file("prefetch.log"));
  const auto t0 = Clock::now();
  bool landed = false;
  while (since(t0) < 30) {
    for (const std::string& f : files_on_drives(drives_))
      if (f.find(".tmp-") == std::string::npos) landed = true;
    if (landed) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(landed) << test::read_bytes(c.log);
  ::kill(c.pid, SIGINT);
  const auto t1 = Clock::now();
  const int rc = wait_child(c, 30);
  const std::string log = test::read_bytes(c.log);
  std::printf("Ctrl-C: exited %d after %.2f s\n", rc, since(t1));
  EXPECT_EQ(rc, 1) << log;
  EXPECT_NE(log.find("interrupted"), std::string::npos) << log;
  const size_t partial = local_experts(m).size();
  EXPECT_GT(partial, 0u);
  EXPECT_LT(partial, static_cast<size_t>((m.layers - 1) * m.experts)) << "the prefetch ended before the interrupt";
  EXPECT_TRUE(temporaries(drives_).empty());

  std::string out;
  EXPECT_EQ(run_command(cli(cat("doctor --full --quiet --store ", store_)), &out), 0) << out;
  EXPECT_NE(out.find(", 0 problems"), std::string::npos) << out;

  proxy_->set_rule(none());
  ASSERT_EQ(run_command(cli(cat("prefetch --store ", store_, " --all --quiet")), &out), 0) << out;
  EXPECT_NE(out.find(cat(144 - partial, " experts fetched, ", partial, " already on the drives")), std::string::npos)
      << out;
  EXPECT_EQ(local_experts(m).size(), 144u);
  EXPECT_EQ(run_command(cli(cat("doctor --full --quiet --store ", store_)), &out), 0) << out;
  EXPECT_TRUE(temporaries(drives_).empty());
}

// ---------------------------------------------------------------- g. setup --full

TEST_F(StreamStore, FullSetupRunsWithoutTheMirror) {
  std::string out;
  ASSERT_EQ(run_command(cli(cat("setup --source ", mirror_url(), " --full --store ", store_, " --drives ", drives_[0], ",",
                                drives_[1], " --drive-mbps 500,500 --spine bf16 --quiet")),
                        &out),
            0)
      << out;
  EXPECT_NE(out.find("--full: 144 experts fetched"), std::string::npos) << out;
  const StoreManifest m = load_store_manifest(store_);
  ASSERT_TRUE(m.remote.has_value());
  EXPECT_EQ(local_experts(m).size(), 144u);
  EXPECT_EQ(files_on_drives(drives_).size(), 144u);
  EXPECT_EQ(HashJournal(store_, m.layers, m.experts).known(), 144u);
  EXPECT_FAILS_WITH(
      [&] {
        StreamSetupOptions so = stream_options(mirror_url());
        so.full = true;
        so.disk_budget_bytes = 1000;
        run_stream_setup(so);
      }(),
      "--disk-budget", "--full");

  nginx_.reset();
  expect_identical_logits("");
  expect_identical_logits("--fetch-threads 1 --lookahead off");
  EXPECT_EQ(run_command(cli(cat("doctor --full --quiet --store ", store_)), &out), 0) << out;
}

// ---------------------------------------------------------------- h. SHA256SUMS

class StreamStoreOwnMirror : public StreamStore {
protected:
  // A copy of the checkpoint under its own root, so files can be added or changed.
  void SetUp() override {
    StreamStore::SetUp();
    if (IsSkipped() || HasFailure()) return;
    fs::create_directories(root_.file("www"));
    fs::copy(shared().ckpt, root_.file("www/ckpt"), fs::copy_options::recursive);
    nginx_ = std::make_unique<NginxMirror>(root_.file("www"));
  }
  std::string sums_path() const { return root_.file("www/ckpt/SHA256SUMS"); }
  std::string line(const std::string& name, bool star = false) const {
    return cat(sha256_file_hex(root_.file("www/ckpt/" + name)), star ? " *" : "  ", name, "\n");
  }
};

TEST_F(StreamStoreOwnMirror, ShardChangedOnTheMirrorIsRefusedUntilSetupAgain) {
  stream_setup(mirror_url());
  StoreManifest m = load_store_manifest(store_);
  const ExpertRanges ranges = ExpertRanges::load(store_, m);
  const RemoteFile shard = m.remote->shards[ranges.tensors(1, 0)[0].shard];  // a copy: m is reloaded below
  // Same bytes, another modification time: nginx's ETag changes.
  const std::string path = root_.file("www/ckpt/" + shard.name);
  fs::last_write_time(path, fs::last_write_time(path) - std::chrono::hours(1));
  {
    ExpertFetcher f(store_, m, fetch_options());
    std::vector<uint8_t> buf;
    const ReadResult r = fetch_one(f, 1, 0, buf);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("layer 1 expert 0"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find(shard.name), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("changed on the mirror since setup"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find(shard.etag), std::string::npos) << r.error;
    EXPECT_EQ(f.counters().retries, 0u) << "a changed file is not retried";
  }
  EXPECT_TRUE(files_on_drives(drives_).empty());
  // setup --stream again learns the new ETag; the store works.
  stream_setup(mirror_url());
  m = load_store_manifest(store_);
  EXPECT_NE(m.remote->shards[ranges.tensors(1, 0)[0].shard].etag, shard.etag);
  ExpertFetcher f(store_, m, fetch_options());
  std::vector<uint8_t> buf;
  const ReadResult r = fetch_one(f, 1, 0, buf);
  ASSERT_TRUE(r.ok) << r.error;
  expect_record(buf, 1, 0);
}

TEST_F(StreamStoreOwnMirror, PublishedDigestsAreChecked) {
  std::string sums = line("config.json") + line("tokenizer_config.json", true) + line("tiktoken.model") +
                     line("model.safetensors.index.json");
  std::vector<std::string> shard_files;
  for (const auto& e : fs::directory_iterator(root_.file("www/ckpt")))
    if (e.path().extension() == ".safetensors") shard_files.push_back(e.path().filename().string());
  for (const std::string& s : shard_files) sums += line(s);
  write_bytes(sums_path(), "\n" + sums);  // a blank line is allowed
  std::string out;
  ASSERT_EQ(run_command(cli(cat("setup --source ", mirror_url(), "/ --stream --store ", store_, " --drives ", drives_[0],
                                ",", drives_[1], " --drive-mbps 500,500 --spine bf16 --quiet")),
                        &out),
            0)
      << out;
  EXPECT_NE(out.find(cat("SHA256SUMS lists ", 4 + shard_files.size(), " files; they are checked")), std::string::npos)
      << out;
  const StoreManifest m = load_store_manifest(store_);
  EXPECT_EQ(m.remote->url, mirror_url());  // the trailing '/' dropped
  EXPECT_EQ(m.remote->checksums, "SHA256SUMS");
  for (const RemoteFile& f : m.remote->shards)
    EXPECT_EQ(f.sha256, sha256_file_hex(root_.file("www/ckpt/" + f.name))) << f.name;
}

TEST_F(StreamStoreOwnMirror, WrongDigestForConfigRefusesAndWritesNoStore) {
  std::string wrong = line("config.json");
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  write_bytes(sums_path(), line("tiktoken.model") + wrong);
  EXPECT_FAILS_WITH(stream_setup(mirror_url()), "config.json", "SHA256SUMS", wrong.substr(0, 64));
  EXPECT_FALSE(file_exists(store_ + "/store.json"));
  EXPECT_FALSE(file_exists(store_ + "/remote/source/config.json"));
  // The CLI says the same and fails.
  std::string out;
  EXPECT_EQ(run_command(cli(cat("setup --source ", mirror_url(), " --stream --store ", store_, " --drives ", drives_[0],
                                " --drive-mbps 500 --quiet")),
                        &out),
            1)
      << out;
  EXPECT_NE(out.find("config.json"), std::string::npos) << out;
  EXPECT_NE(out.find("SHA256SUMS"), std::string::npos) << out;
  EXPECT_FALSE(file_exists(store_ + "/store.json"));
}

TEST_F(StreamStoreOwnMirror, MalformedLineIsNamed) {
  write_bytes(sums_path(), line("config.json") + "not a digest line\n");
  EXPECT_FAILS_WITH(stream_setup(mirror_url()), mirror_url() + "/SHA256SUMS", "line 2", "not a digest line");
  EXPECT_FALSE(file_exists(store_ + "/store.json"));
}

// ---------------------------------------------------------------- i. a damaged streamed store

TEST_F(StreamStore, MissingExpertRangesFileIsNamed) {
  stream_setup(mirror_url());
  const StoreManifest m = load_store_manifest(store_);
  const std::string ranges = ExpertRanges::path(store_);
  ASSERT_TRUE(file_exists(ranges));
  fs::remove(ranges);
  EXPECT_FAILS_WITH(ExpertFetcher(store_, m, fetch_options()), "remote/experts.bin");
  std::string out, npy;
  EXPECT_EQ(store_logits("", &out, &npy), 1) << out;
  EXPECT_NE(out.find(ranges), std::string::npos) << out;
  EXPECT_EQ(run_command(cli(cat("prefetch --store ", store_, " --all")), &out), 1) << out;
  EXPECT_NE(out.find(ranges), std::string::npos) << out;
}

}  // namespace

// doctor only reads a streamed store: it must not create remote/hashes.bin.
TEST_F(StreamStore, DoctorDoesNotWriteTheStore) {
  stream_setup(mirror_url());
  const std::string journal = HashJournal::path(fs::canonical(store_).string());
  fs::remove(journal);
  const DoctorReport d = run_doctor(store_, true);
  EXPECT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems[0]);
  EXPECT_GT(d.not_fetched, 0u);
  EXPECT_FALSE(fs::exists(journal));
}

// A streamed store's experts not fetched yet are absent, not stray; a file
// that is there under a name the placement does not give its drive is.
TEST_F(StreamStore, DoctorListsAFileThePlacementDoesNotName) {
  stream_setup(mirror_url());
  const StoreManifest m = load_store_manifest(store_);
  DoctorReport d = run_doctor(store_, false);
  EXPECT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems[0]);
  EXPECT_GT(d.not_fetched, 0u);
  EXPECT_TRUE(d.strays.empty()) << d.strays[0].path;
  ASSERT_EQ(m.entry(1, 0).drives.size(), 1u);
  const int elsewhere = 1 - m.entry(1, 0).drives[0];
  const std::string stray = m.expert_path(elsewhere, 1, 0);
  fs::create_directories(fs::path(stray).parent_path());
  write_bytes(stray, std::string(m.expert_bytes, 'x'));
  d = run_doctor(store_, false);
  EXPECT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems[0]);
  ASSERT_EQ(d.strays.size(), 1u);
  EXPECT_EQ(d.strays[0].path, stray);
  EXPECT_EQ(d.strays[0].bytes, m.expert_bytes);
  EXPECT_FALSE(d.strays[0].temporary);
}

// setup --stream over a store built from a local checkpoint is refused: the
// mirror's experts cannot be told equal to the local ones without fetching
// them, and trusting the old hashes could serve another model's experts.
TEST_F(StreamStore, StreamSetupOverALocalStoreIsRefused) {
  SetupOptions local;
  local.from = shared().ckpt;
  local.store = store_;
  local.drives = drives_;
  local.spine = "bf16";
  local.drive_mbps = {2000, 2000};
  local.quiet = true;
  run_setup(local);
  const std::string before = test::read_bytes(store_ + "/store.json");
  EXPECT_FAILS_WITH(stream_setup(mirror_url()), "built from a local checkpoint", "another --store");
  EXPECT_EQ(test::read_bytes(store_ + "/store.json"), before);  // the local store is untouched
  const DoctorReport d = run_doctor(store_, true);
  EXPECT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems[0]);
}

// A budget that cannot make room for the new expert, however much is
// evicted, evicts nothing: the fetched bytes are used and not kept, and
// what was on the drives stays.
TEST_F(StreamStore, BudgetTooSmallForOneMoreEvictsNothing) {
  stream_setup(mirror_url());
  const StoreManifest m = load_store_manifest(store_);
  prefetch_experts(store_, m, PrefetchRange{1, 1}, fetch_options(), true);
  const auto before = local_experts(m);
  ASSERT_EQ(before.size(), static_cast<size_t>(m.experts));
  FetchOptions fo = fetch_options();
  fo.disk_budget_bytes = m.expert_bytes / 2;  // less than one expert: no eviction can make room
  ExpertFetcher f(store_, m, fo);
  std::vector<uint8_t> buf;
  const ReadResult r = fetch_one(f, 2, 3, buf);
  ASSERT_TRUE(r.ok) << r.error;
  expect_record(buf, 2, 3);
  EXPECT_EQ(f.counters().evicted, 0u);
  EXPECT_EQ(f.counters().not_kept, 1u);
  EXPECT_FALSE(f.is_local(2, 3));
  EXPECT_EQ(local_experts(m), before);
}
