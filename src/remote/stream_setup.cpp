#include "remote/stream_setup.h"

#include <filesystem>
#include <map>
#include <mutex>

#include "model/common/family_checkpoint.h"
#include "model/registry.h"
#include "remote/expert_ranges.h"
#include "remote/mirror_reply.h"
#include "remote/prefetch_experts.h"
#include "remote/remote_file_source.h"
#include "util/error.h"
#include "util/file.h"
#include "util/progress.h"
#include "util/sha256.h"

namespace deltafin {

namespace fs = std::filesystem;

namespace {

// The mirror's checksum list, when it publishes one (a 404 means it does not).
constexpr const char* kChecksumFile = "SHA256SUMS";
// Small files setup needs; config.json must exist, the others are optional
// as they are for a local checkpoint (each family reads its own tokenizer:
// K3 tiktoken.model, Qwen3 tokenizer.json).
constexpr const char* kRequired[] = {"config.json"};
constexpr const char* kOptional[] = {"tiktoken.model", "tokenizer.json", "tokenizer_config.json",
                                     "generation_config.json", "model.safetensors.index.json"};

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string normalise_url(std::string url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    fail("--source: '", url, "' (expected an http:// or https:// URL of the mirror)");
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// Downloads one small file into dir, checked against the published list.
bool fetch_small_file(HttpClient& client, const std::string& url, const std::string& name, const std::string& dir,
                      const std::map<std::string, std::string>& published, bool required) {
  const std::string file_url = HttpClient::join(url, name);
  std::optional<std::string> body = client.get_optional(file_url);
  if (!body) {
    if (required) fail(file_url, ": not found on the mirror (a checkpoint needs ", name, ")");
    return false;
  }
  if (auto it = published.find(name); it != published.end()) {
    const std::string got = to_hex(sha256(body->data(), body->size()));
    if (got != it->second)
      fail(file_url, ": SHA-256 ", got, " differs from the mirror's ", kChecksumFile, " (", it->second,
           "); nothing was written");
  }
  write_file_atomic(dir + "/" + name, *body);
  return true;
}

}  // namespace

StreamSetupReport run_stream_setup(const StreamSetupOptions& so) {
  if (so.setup.store.empty()) fail("--store: the store directory is required");
  if (so.full && so.disk_budget_bytes)
    fail("--disk-budget: --full keeps every expert on the drives; a budget applies to --stream only");
  // Before anything is downloaded (run_setup would say it only after the headers came).
  if (so.setup.layout == "striped")
    fail("--layout striped with --", so.full ? "full" : "stream",
         ": a store built from a mirror fetches and keeps whole experts; use --layout whole or auto");
  const std::string url = normalise_url(so.source_url);
  http_global_init();
  StreamSetupReport report;
  auto client = std::make_shared<HttpClient>(so.fetch.http);
  auto client_mutex = std::make_shared<std::mutex>();

  // 1. The small files, into store/remote/source (the `from` of the setup).
  fs::create_directories(so.setup.store);
  const std::string source = fs::canonical(so.setup.store).string() + "/remote/source";
  fs::create_directories(source);
  std::map<std::string, std::string> published;
  const std::string sums_url = HttpClient::join(url, kChecksumFile);
  if (std::optional<std::string> sums = client->get_optional(sums_url)) {
    for (auto& [name, digest] : parse_sha256sums(*sums, sums_url)) published[name] = digest;
    report.checksums = kChecksumFile;
    say(cat("mirror ", url, ": ", kChecksumFile, " lists ", published.size(), " files; they are checked"));
  } else {
    say(cat("mirror ", url, ": publishes no ", kChecksumFile,
            "; experts are checked against the hash recorded at their first fetch"));
  }
  for (const char* name : kRequired) fetch_small_file(*client, url, name, source, published, true);
  for (const char* name : kOptional)
    if (!fetch_small_file(*client, url, name, source, published, false)) fs::remove(source + "/" + name);

  // 2. The shards: size and ETag by HEAD, headers and spine tensors by range.
  RemoteSource remote;
  remote.url = url;
  remote.checksums = report.checksums;
  remote.disk_budget_bytes = so.disk_budget_bytes;
  std::map<std::string, size_t> shard_index;
  auto opener = [&](const std::string& name) -> std::unique_ptr<ByteSource> {
    const std::string file_url = HttpClient::join(url, name);
    RemoteFileInfo info;
    {
      std::lock_guard<std::mutex> g(*client_mutex);
      info = client->head(file_url);
    }
    if (!info.accepts_ranges)
      fail(file_url, ": the mirror does not announce byte ranges (Accept-Ranges: bytes); --stream needs them");
    auto it = published.find(name);
    shard_index[name] = remote.shards.size();
    remote.shards.push_back({name, info.bytes, info.etag, it == published.end() ? "" : it->second});
    return std::make_unique<RemoteFileSource>(client, client_mutex, file_url, info.bytes, info.etag);
  };
  const ShardOpener shard_opener = opener;
  const std::unique_ptr<FamilyCheckpoint> family =
      with_context(cat("mirror ", url), [&] { return open_family_checkpoint(source, &shard_opener); });
  for (const RemoteFile& f : remote.shards) report.checkpoint_bytes += f.bytes;
  for (const auto& e : fs::directory_iterator(source)) report.checkpoint_bytes += fs::file_size(e.path());

  // 3. The usual setup from here: spine, placement, manifest (last).
  SetupOptions o = so.setup;
  o.from = source;
  o.checkpoint = family.get();
  o.remote = remote;
  const ExpertRanges ranges = ExpertRanges::from_checkpoint(*family, remote.shards);
  o.write_remote_files = [&](const std::string& store) { ranges.save(store); };
  report.setup = run_setup(o);
  report.fetched_bytes = client->bytes_received();
  report.requests = client->requests();
  say(cat("setup --", so.full ? "full" : "stream", ": moved ", human_bytes(static_cast<double>(report.fetched_bytes)),
          " in ", report.requests, " requests for the spine, of a ",
          human_bytes(static_cast<double>(report.checkpoint_bytes)), " checkpoint"));
  if (!so.full) return report;

  // 4. --full: every expert through the fetcher.
  const StoreManifest m = load_store_manifest(o.store);
  FetchOptions fetch = so.fetch;
  fetch.matrices = mxfp4_matrices(m.record);
  const PrefetchReport p = prefetch_experts(fs::canonical(o.store).string(), m, PrefetchRange{}, fetch, o.quiet);
  report.experts_fetched = p.fetched;
  report.expert_bytes_fetched = p.bytes_received;
  return report;
}

}  // namespace deltafin
