#include "remote/prefetch_experts.h"

#include <condition_variable>
#include <mutex>

#include "io/aligned_buffer.h"
#include "store/install.h"
#include "util/error.h"
#include "util/progress.h"

namespace deltafin {

std::vector<ExpertMatrixShape> mxfp4_matrices(const std::vector<RecordPart>& record) {
  std::vector<ExpertMatrixShape> out;
  for (size_t i = 0; i + 1 < record.size(); ++i) {
    const RecordPart& packed = record[i];
    const RecordPart& scale = record[i + 1];
    if (packed.dtype != "U8" || scale.dtype != "U8" || packed.shape.size() != 2 || scale.shape.size() != 2 ||
        packed.shape[0] != scale.shape[0] || packed.shape[1] != scale.shape[1] * 16 ||
        scale.offset != packed.offset + packed.bytes)
      continue;
    out.push_back({packed.shape[0], packed.shape[1] * 2});
    ++i;
  }
  return out;
}

PrefetchReport prefetch_experts(const std::string& store_dir, const StoreManifest& m, PrefetchRange range,
                                FetchOptions fetch, bool quiet) {
  const int64_t first_moe = m.moe_layers.front(), last_moe = m.moe_layers.back();
  const int64_t first = range.first_layer < 0 ? first_moe : range.first_layer;
  const int64_t last = range.last_layer < 0 ? last_moe : range.last_layer;
  if (first < first_moe || last > last_moe || first > last)
    fail("--layers: ", first, "-", last, " is not within the MoE layers ", first_moe, "-", last_moe);
  const int threads = fetch.threads;
  InterruptGuard interrupts;  // from here Ctrl-C sets a flag (checked below and by every transfer)
  // Ctrl-C stops transfers at once, not after a stalled mirror's timeouts.
  fetch.http.cancelled = [] { return interrupt_requested(); };
  ExpertFetcher fetcher(store_dir, m, std::move(fetch));
  PrefetchReport report;
  std::vector<std::pair<int64_t, int64_t>> todo;
  uint64_t need = 0;
  for (int64_t l = first; l <= last; ++l)
    for (int64_t e = 0; e < m.experts && m.is_moe_layer(l); ++e) {
      if (fetcher.is_local(l, e)) {
        ++report.already_local;
        continue;
      }
      todo.push_back({l, e});
      need += m.expert_bytes * m.entry(l, e).drives.size();
    }
  const uint64_t budget = fetcher.disk_budget_bytes();
  if (budget && fetcher.disk_used_bytes() + need > budget)
    fail("prefetch: layers ", first, "-", last, " need ", human_bytes(static_cast<double>(need)),
         " more on the drives, but the disk budget is ", human_bytes(static_cast<double>(budget)), " and ",
         human_bytes(static_cast<double>(fetcher.disk_used_bytes())),
         " is used: fetch fewer layers or raise the budget (setup --disk-budget)");

  // A few buffers per download thread keep every connection busy.
  const size_t buffers = static_cast<size_t>(threads) * 2;
  std::vector<AlignedBuffer> pool;
  std::vector<uint8_t*> free_buffers;
  for (size_t i = 0; i < std::min(buffers, todo.size()); ++i) {
    pool.push_back(make_aligned_buffer(m.expert_bytes));
    free_buffers.push_back(pool.back().get());
  }
  std::mutex mu;
  std::condition_variable cv;
  std::string first_error;
  size_t in_flight = 0;
  Progress progress("prefetch", todo.size() * m.expert_bytes, !quiet);
  auto wait_for = [&](auto pred) {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, pred);
  };
  try {
    for (const auto& [l, e] : todo) {
      wait_for([&] { return !free_buffers.empty() || !first_error.empty(); });
      check_interrupt();
      uint8_t* buf;
      {
        std::lock_guard<std::mutex> g(mu);
        if (!first_error.empty()) break;
        buf = free_buffers.back();
        free_buffers.pop_back();
        ++in_flight;
      }
      FetchRequest r;
      r.layer = l;
      r.expert = e;
      r.priority = ReadPriority::Demand;
      r.dest = buf;
      r.on_done = [&, buf](const ReadResult& res) {
        std::lock_guard<std::mutex> g(mu);
        if (res.ok) {
          ++report.fetched;
          progress.add(m.expert_bytes);
        } else if (first_error.empty()) {
          first_error = res.cancelled ? "cancelled" : res.error;
        }
        free_buffers.push_back(buf);
        --in_flight;
        cv.notify_all();
      };
      fetcher.submit(std::move(r));
    }
    wait_for([&] { return in_flight == 0; });
  } catch (...) {
    wait_for([&] { return in_flight == 0; });  // the buffers must outlive the fetches
    throw;
  }
  check_interrupt();
  if (!first_error.empty()) fail(first_error);
  progress.finish();
  const FetchCounters c = fetcher.counters();
  report.bytes_received = c.bytes;
  report.retries = c.retries;
  report.seconds = progress.seconds();
  return report;
}

}  // namespace deltafin
