#include "io/expert_reader.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "io/io_test_util.h"
#include "io/monitor.h"
#include "io/test_hooks.h"
#include "support/reader_capability.h"

namespace deltafin {
namespace {

using test::Results;
using test::TestDrives;
using test::TestRead;
using test::make_request;
using test::read_trace;
using test::same_bytes;
using test::trace_of;
using test::untouched;

constexpr uint64_t kChunk = 16384;

class ReaderTest : public ::testing::TestWithParam<IoEngine> {
protected:
  ReaderOptions options(int queue_depth = 2, bool direct = true) const {
    ReaderOptions o;
    o.engine = GetParam();
    o.queue_depth = queue_depth;
    o.chunk_bytes = kChunk;
    o.direct = direct;
    o.prefetch_max_wait_s = 100;  // no anti-starvation unless a test asks for it
    return o;
  }
  // A "/uring" case that ran on the pread pool would prove nothing about
  // io_uring: it needs io_uring here (a failure under CI, a loud skip elsewhere).
  void SetUp() override {
    if (GetParam() != IoEngine::Uring) return;
    std::string why;
    REQUIRE_CAPABILITY("io_uring", test::io_uring_here(&why), why);
  }
  // The reader runs on the engine asked for, and the process holds a ring
  // exactly when that is io_uring (counted in /proc, not taken from the reader).
  void check_engine(const ExpertReader& reader) const {
    EXPECT_EQ(reader.engine(), GetParam()) << reader.engine_note();
    EXPECT_EQ(reader.engine_note(), "");
    const int rings = test::io_uring_rings();
    if (rings >= 0) {
      EXPECT_EQ(rings, GetParam() == IoEngine::Uring ? 1 : 0) << "io_uring instances held";
    }
  }
  // One CRC-checked read of (layer, expert) replicated on drives 0 and 1, with
  // queue depth 1 and the trace at trace_path(); status: the drives after it.
  ReadResult read_replicated_once(const TestDrives& drives, int64_t layer, int64_t expert, uint64_t size,
                                  const std::string& want, TestRead& read, std::vector<DriveStatus>& status) {
    Monitor monitor(2);
    monitor.open_trace(trace_path());
    Results results;
    {
      ExpertReader reader(drives.specs(), options(1), &monitor);
      ReadRequest rq = make_request(drives, layer, expert, {0, 1}, size, &read, &results);
      rq.crc32c = crc32c(want.data(), want.size());
      read.ticket = reader.submit(std::move(rq));
      results.wait(1);
      status = reader.drive_status();
    }
    monitor.close_trace();
    results.expect_once();
    return results.get(read.ticket);
  }
  // One read of each size (expert i of layer 1, on drive 0), every other one
  // CRC-checked, so both the checked and the unchecked path run.
  static void submit_each_size(ExpertReader& reader, const TestDrives& drives, const std::vector<uint64_t>& sizes,
                               const std::vector<std::string>& want, std::vector<TestRead>& reads, Results& results) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      ReadRequest rq = make_request(drives, 1, static_cast<int64_t>(i), {0}, sizes[i], &reads[i], &results);
      if (i % 2) rq.crc32c = crc32c(want[i].data(), want[i].size());
      reads[i].ticket = reader.submit(std::move(rq));
    }
  }
  test::TempDir tmp_;
  std::string trace_path() const { return tmp_.file("trace.jsonl"); }
};

std::string engine_param_name(const ::testing::TestParamInfo<IoEngine>& info) { return io_engine_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Engines, ReaderTest, ::testing::Values(IoEngine::Uring, IoEngine::Pread), engine_param_name);

TEST_P(ReaderTest, ExactBytesDirectAndBuffered) {
  std::string why;
  REQUIRE_CAPABILITY("O_DIRECT", test::direct_io_here(&why), why);
  TestDrives drives(1);
  const std::vector<uint64_t> sizes = {0,     1,         4095,          4096,         4097, 3 * 4096 + 5,
                                       kChunk, kChunk + 1, 2 * kChunk + 100, 3 * kChunk, 5 * kChunk - 4096 + 7};
  std::vector<std::string> want;
  for (size_t i = 0; i < sizes.size(); ++i) want.push_back(drives.put(0, 1, static_cast<int64_t>(i), sizes[i]));
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct" : "buffered");
    Results results;
    std::vector<TestRead> reads(sizes.size());
    {
      ExpertReader reader(drives.specs(), options(2, direct), nullptr);
      check_engine(reader);
      submit_each_size(reader, drives, sizes, want, reads, results);
      for (const TestRead& read : reads) EXPECT_NE(read.ticket, 0u);
      results.wait(sizes.size());
      auto status = reader.drive_status();
      EXPECT_EQ(status[0].direct, direct);
      EXPECT_EQ(status[0].note, "");
    }
    results.expect_once();
    for (size_t i = 0; i < sizes.size(); ++i) {
      ReadResult r = results.get(reads[i].ticket);
      EXPECT_TRUE(r.ok) << "size " << sizes[i] << ": " << r.error;
      EXPECT_FALSE(r.cancelled);
      EXPECT_TRUE(same_bytes(reads[i], want[i])) << "size " << sizes[i];
    }
  }
}

TEST_P(ReaderTest, ManyConcurrentReadsOverThreeDrives) {
  TestDrives drives(3);
  constexpr int kReads = 90;
  struct Plan {
    int64_t layer, expert;
    uint64_t size;
    std::vector<int> on;
    bool prefetch;
    std::string want;
  };
  std::vector<Plan> plan;
  for (int i = 0; i < kReads; ++i) {
    Plan p{i / 30, i % 30, 1 + static_cast<uint64_t>(i) * 7919 % (5 * kChunk), {}, i % 3 == 1, {}};
    const int copies = 1 + i % 3;
    for (int c = 0; c < copies; ++c) p.on.push_back((i + c) % 3);
    for (int d : p.on) p.want = drives.put(d, p.layer, p.expert, p.size);
    plan.push_back(std::move(p));
  }
  Monitor monitor(3);
  monitor.open_trace(trace_path());
  Results results;
  std::vector<TestRead> reads(kReads);
  std::vector<char> cancelled(kReads, 0);
  {
    ExpertReader reader(drives.specs(), options(2), &monitor);
    check_engine(reader);
    auto submit_range = [&](int from, int step) {
      for (int i = from; i < kReads; i += step) {
        const Plan& p = plan[static_cast<size_t>(i)];
        ReadRequest rq = make_request(drives, p.layer, p.expert, p.on, p.size, &reads[static_cast<size_t>(i)], &results,
                                      p.prefetch ? ReadPriority::Prefetch : ReadPriority::Demand);
        if (i % 4 == 0) rq.crc32c = crc32c(p.want.data(), p.want.size());
        reads[static_cast<size_t>(i)].ticket = reader.submit(std::move(rq));
      }
    };
    std::thread other(submit_range, 1, 2);
    submit_range(0, 2);
    other.join();
    for (int i = 0; i < kReads; ++i) {
      if (!plan[static_cast<size_t>(i)].prefetch) continue;
      if (i % 5 == 0) reader.promote(reads[static_cast<size_t>(i)].ticket);
      if (i % 7 == 0) cancelled[static_cast<size_t>(i)] = reader.cancel(reads[static_cast<size_t>(i)].ticket);
    }
    results.wait(kReads);
  }
  monitor.close_trace();
  results.expect_once();
  uint64_t read_bytes = 0;
  for (int i = 0; i < kReads; ++i) {
    const TestRead& r = reads[static_cast<size_t>(i)];
    ReadResult res = results.get(r.ticket);
    if (cancelled[static_cast<size_t>(i)]) {
      EXPECT_TRUE(res.cancelled);
      EXPECT_FALSE(res.ok);
      EXPECT_TRUE(untouched(r)) << i;
      continue;
    }
    EXPECT_TRUE(res.ok) << i << ": " << res.error;
    EXPECT_TRUE(same_bytes(r, plan[static_cast<size_t>(i)].want)) << i;
    read_bytes += r.bytes;
  }
  // The monitor saw every byte read, in its bins and its counters.
  uint64_t bin_sum = 0, counter_sum = 0;
  for (const auto& bins : monitor.drive_bins())
    for (uint64_t b : bins) bin_sum += b;
  for (const auto& c : monitor.drive_counters()) counter_sum += c.bytes;
  EXPECT_EQ(bin_sum, read_bytes);
  EXPECT_EQ(counter_sum, read_bytes);
  EXPECT_EQ(read_trace(trace_path()).size(), static_cast<size_t>(kReads));
}

TEST_P(ReaderTest, ReplicatedReadSplitsAcrossReplicas) {
  TestDrives drives(2);
  const uint64_t size = 4 * kChunk + 10;
  const std::string want = drives.put(0, 2, 5, size);
  drives.put(1, 2, 5, size);
  TestRead read;
  std::vector<DriveStatus> status;
  ReadResult r = read_replicated_once(drives, 2, 5, size, want, read, status);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(same_bytes(read, want));
  EXPECT_GT(status[0].counters.bytes, 0u);
  EXPECT_GT(status[1].counters.bytes, 0u);
  EXPECT_EQ(status[0].counters.bytes + status[1].counters.bytes, size);
  auto rec = trace_of(read_trace(trace_path()), 2, 5);
  EXPECT_EQ(rec["drives"], nlohmann::json::array({0, 1}));
}

TEST_P(ReaderTest, ReplicaChoicePrefersTheFasterDrive) {
  TestDrives drives(2);
  const std::string want = drives.put(0, 0, 1, 5000);
  drives.put(1, 0, 1, 5000);
  Results results;
  TestRead read;
  std::vector<DriveStatus> status;
  {
    ExpertReader reader(drives.specs({1e8, 1e10}), options(2), nullptr);
    read.ticket = reader.submit(make_request(drives, 0, 1, {0, 1}, 5000, &read, &results));
    results.wait(1);
    status = reader.drive_status();
  }
  EXPECT_TRUE(same_bytes(read, want));
  EXPECT_EQ(status[0].counters.bytes, 0u);
  EXPECT_EQ(status[1].counters.bytes, 5000u);
}

TEST_P(ReaderTest, ReplicaChoicePrefersTheIdleDrive) {
  TestDrives drives(2);
  const std::string busy = drives.put(0, 0, 1, 4 * kChunk);  // only on drive 0
  const std::string want = drives.put(0, 0, 2, 5000);
  drives.put(1, 0, 2, 5000);
  Results results;
  TestRead a, b;
  std::vector<DriveStatus> status;
  {
    ExpertReader reader(drives.specs(), options(1), nullptr);
    reader.pause_dispatch(true);
    a.ticket = reader.submit(make_request(drives, 0, 1, {0}, 4 * kChunk, &a, &results));
    b.ticket = reader.submit(make_request(drives, 0, 2, {0, 1}, 5000, &b, &results));
    status = reader.drive_status();
    EXPECT_EQ(status[0].queued_bytes, 4 * kChunk);  // the replicated read is not bound yet
    EXPECT_EQ(status[1].queued_bytes, 0u);
    reader.pause_dispatch(false);
    results.wait(2);
    status = reader.drive_status();
  }
  EXPECT_TRUE(same_bytes(a, busy));
  EXPECT_TRUE(same_bytes(b, want));
  EXPECT_EQ(status[0].counters.bytes, 4 * kChunk);
  EXPECT_EQ(status[1].counters.bytes, 5000u);
  EXPECT_EQ(status[0].queued_bytes + status[1].queued_bytes, 0u);
}

TEST_P(ReaderTest, DemandBeforePrefetch) {
  TestDrives drives(1);
  for (int e = 0; e < 4; ++e) drives.put(0, 0, e, 2 * kChunk);
  Monitor monitor(1);
  monitor.open_trace(trace_path());
  Results results;
  std::vector<TestRead> reads(4);
  {
    ExpertReader reader(drives.specs(), options(1), &monitor);
    reader.pause_dispatch(true);
    // Two prefetches, then two demand reads; one read in flight at a time.
    for (int e = 0; e < 4; ++e)
      reads[e].ticket = reader.submit(make_request(drives, 0, e, {0}, 2 * kChunk, &reads[e], &results,
                                                   e < 2 ? ReadPriority::Prefetch : ReadPriority::Demand));
    reader.pause_dispatch(false);
    results.wait(4);
  }
  monitor.close_trace();
  auto trace = read_trace(trace_path());
  const double p0 = trace_of(trace, 0, 0)["start_s"], p1 = trace_of(trace, 0, 1)["start_s"];
  const double d0 = trace_of(trace, 0, 2)["start_s"], d1 = trace_of(trace, 0, 3)["start_s"];
  EXPECT_LT(d0, d1);
  EXPECT_LT(d1, p0);
  EXPECT_LT(p0, p1);
  // A demand read's chunks all go before the prefetch's first.
  EXPECT_LE(trace_of(trace, 0, 3)["end_s"].get<double>(), p0);
  EXPECT_TRUE(trace_of(trace, 0, 0)["prefetch"].get<bool>());
  EXPECT_FALSE(trace_of(trace, 0, 2)["prefetch"].get<bool>());
}

TEST_P(ReaderTest, PrefetchIsNotStarvedByDemand) {
  TestDrives drives(1);
  for (int e = 0; e < 6; ++e) drives.put(0, 0, e, kChunk);
  Monitor monitor(1);
  monitor.open_trace(trace_path());
  Results results;
  std::vector<TestRead> reads(6);
  {
    ReaderOptions o = options(1);
    o.prefetch_max_wait_s = 0.02;
    ExpertReader reader(drives.specs(), o, &monitor);
    reader.pause_dispatch(true);
    reads[0].ticket = reader.submit(make_request(drives, 0, 0, {0}, kChunk, &reads[0], &results, ReadPriority::Prefetch));
    std::this_thread::sleep_for(std::chrono::milliseconds(40));  // the prefetch has waited longer than its limit
    for (int e = 1; e < 6; ++e) reads[e].ticket = reader.submit(make_request(drives, 0, e, {0}, kChunk, &reads[e], &results));
    reader.pause_dispatch(false);
    results.wait(6);
  }
  monitor.close_trace();
  auto trace = read_trace(trace_path());
  const double p = trace_of(trace, 0, 0)["start_s"];
  for (int e = 1; e < 6; ++e) EXPECT_LT(p, trace_of(trace, 0, e)["start_s"].get<double>()) << e;
}

TEST_P(ReaderTest, CancelQueuedPrefetch) {
  TestDrives drives(1);
  drives.put(0, 0, 0, 3 * kChunk);
  Monitor monitor(1);
  monitor.open_trace(trace_path());
  Results results;
  TestRead read;
  {
    ExpertReader reader(drives.specs(), options(1), &monitor);
    reader.pause_dispatch(true);
    read.ticket = reader.submit(make_request(drives, 0, 0, {0}, 3 * kChunk, &read, &results, ReadPriority::Prefetch));
    EXPECT_TRUE(reader.cancel(read.ticket));
    EXPECT_FALSE(reader.cancel(read.ticket));  // already gone
    results.wait(1);
    reader.pause_dispatch(false);
    EXPECT_EQ(reader.drive_status()[0].queued_bytes, 0u);
  }
  monitor.close_trace();
  results.expect_once();
  ReadResult r = results.get(read.ticket);
  EXPECT_TRUE(r.cancelled);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(untouched(read));
  auto rec = trace_of(read_trace(trace_path()), 0, 0);
  EXPECT_TRUE(rec["cancelled"].get<bool>());
  EXPECT_FALSE(rec["ok"].get<bool>());
}

TEST_P(ReaderTest, CancelReturnsFalseOnceStartedAndForDemand) {
  TestDrives drives(1);
  const std::string want = drives.put(0, 0, 0, 3 * kChunk);
  const std::string want_d = drives.put(0, 0, 1, 100);
  Results results;
  TestRead read, demand;
  {
    ExpertReader reader(drives.specs(), options(1), nullptr);
    // Nothing else is queued: the first chunk starts inside submit().
    read.ticket = reader.submit(make_request(drives, 0, 0, {0}, 3 * kChunk, &read, &results, ReadPriority::Prefetch));
    reader.pause_dispatch(true);  // later chunks may wait here: the read has started all the same
    EXPECT_FALSE(reader.cancel(read.ticket));
    demand.ticket = reader.submit(make_request(drives, 0, 1, {0}, 100, &demand, &results));
    EXPECT_FALSE(reader.cancel(demand.ticket));
    reader.pause_dispatch(false);
    results.wait(2);
    EXPECT_FALSE(reader.cancel(read.ticket));  // finished
  }
  results.expect_once();
  EXPECT_TRUE(results.get(read.ticket).ok);
  EXPECT_FALSE(results.get(read.ticket).cancelled);
  EXPECT_TRUE(same_bytes(read, want));
  EXPECT_TRUE(same_bytes(demand, want_d));
}

// abort(): a started prefetch reads no further chunk and ends cancelled once
// its chunk in flight has landed; a demand read is never aborted.
TEST_P(ReaderTest, AbortStopsAStartedPrefetch) {
  TestDrives drives(1);
  drives.put(0, 0, 0, 4 * kChunk);
  drives.put(0, 0, 1, 100);
  Results results;
  TestRead read, demand;
  uint64_t bytes_read = 0;
  {
    ExpertReader reader(drives.specs(), options(1), nullptr);
    // Queue depth 1: the first chunk starts inside submit(); pausing holds the other three.
    read.ticket = reader.submit(make_request(drives, 0, 0, {0}, 4 * kChunk, &read, &results, ReadPriority::Prefetch));
    reader.pause_dispatch(true);
    EXPECT_FALSE(reader.cancel(read.ticket));  // started: cancel() refuses
    EXPECT_TRUE(reader.abort(read.ticket));
    EXPECT_FALSE(reader.abort(read.ticket));   // already aborted
    demand.ticket = reader.submit(make_request(drives, 0, 1, {0}, 100, &demand, &results));
    EXPECT_FALSE(reader.abort(demand.ticket));
    reader.pause_dispatch(false);
    results.wait(2);
    bytes_read = reader.drive_status()[0].counters.bytes;
  }
  results.expect_once();
  EXPECT_TRUE(results.get(read.ticket).cancelled);
  EXPECT_FALSE(results.get(read.ticket).ok);
  EXPECT_TRUE(results.get(demand.ticket).ok);
  // One chunk of the aborted read (at most) plus the demand read's 4 KiB.
  EXPECT_LE(bytes_read, kChunk + 4096);
}

TEST_P(ReaderTest, PromoteMovesAPrefetchToDemand) {
  TestDrives drives(1);
  for (int e = 0; e < 3; ++e) drives.put(0, 0, e, kChunk);
  Monitor monitor(1);
  monitor.open_trace(trace_path());
  Results results;
  std::vector<TestRead> reads(3);
  {
    ExpertReader reader(drives.specs(), options(1), &monitor);
    reader.pause_dispatch(true);
    reads[0].ticket = reader.submit(make_request(drives, 0, 0, {0}, kChunk, &reads[0], &results, ReadPriority::Prefetch));
    reads[1].ticket = reader.submit(make_request(drives, 0, 1, {0}, kChunk, &reads[1], &results, ReadPriority::Prefetch));
    reads[2].ticket = reader.submit(make_request(drives, 0, 2, {0}, kChunk, &reads[2], &results));
    reader.promote(reads[1].ticket);
    reader.promote(reads[2].ticket);  // a demand read: no-op
    EXPECT_FALSE(reader.cancel(reads[1].ticket));  // now demanded
    reader.pause_dispatch(false);
    results.wait(3);
    reader.promote(reads[1].ticket);  // finished: no-op
  }
  monitor.close_trace();
  auto trace = read_trace(trace_path());
  const double p0 = trace_of(trace, 0, 0)["start_s"], p1 = trace_of(trace, 0, 1)["start_s"];
  const double d = trace_of(trace, 0, 2)["start_s"];
  EXPECT_LT(d, p1);  // the demand read was queued first
  EXPECT_LT(p1, p0);  // the promoted prefetch went ahead of the other
  EXPECT_TRUE(trace_of(trace, 0, 1)["promoted"].get<bool>());
  EXPECT_TRUE(trace_of(trace, 0, 1)["prefetch"].get<bool>());
  EXPECT_FALSE(trace_of(trace, 0, 0)["promoted"].get<bool>());
  EXPECT_FALSE(trace_of(trace, 0, 2)["promoted"].get<bool>());
}

// A bad copy on drive 0 (missing, truncated, longer, one flipped byte) and a
// good one on drive 1: the read succeeds from drive 1 with the exact bytes.
// Drive 1 is declared a million times slower, so every first attempt goes
// wholly to drive 0: with equal drives, which drive a chunk lands on depends
// on which worker wakes first, and a read served wholly by drive 1 would never
// meet the fault (this test failed that way once in CI on a loaded machine).
TEST_P(ReaderTest, FaultyReplicaIsRetriedOnAnother) {
  TestDrives drives(2);
  const uint64_t size = 3 * kChunk + 123;
  std::vector<std::string> want;
  for (int e = 0; e < 4; ++e) want.push_back(drives.put(1, 3, e, size));
  // e0: missing on drive 0.
  drives.put_raw(0, 3, 1, want[1].substr(0, 1000));    // truncated
  drives.put_raw(0, 3, 2, want[2] + "x");              // one byte too many
  std::string bad = want[3];
  bad[size - 7] ^= 0x20;
  drives.put_raw(0, 3, 3, bad);                        // one flipped byte: only the CRC sees it
  Monitor monitor(2);
  monitor.open_trace(trace_path());
  Results results;
  std::vector<TestRead> reads(4);
  {
    ExpertReader reader(drives.specs({1e9, 1e3}), options(2), &monitor);
    for (int e = 0; e < 4; ++e) {
      ReadRequest rq = make_request(drives, 3, e, {0, 1}, size, &reads[e], &results);
      rq.crc32c = crc32c(want[e].data(), want[e].size());
      reads[e].ticket = reader.submit(std::move(rq));
    }
    results.wait(4);
  }
  monitor.close_trace();
  results.expect_once();
  auto trace = read_trace(trace_path());
  for (int e = 0; e < 4; ++e) {
    ReadResult r = results.get(reads[e].ticket);
    EXPECT_TRUE(r.ok) << e << ": " << r.error;
    EXPECT_TRUE(same_bytes(reads[e], want[e])) << e;
    EXPECT_NE(r.recovered.find("layer 3 expert " + std::to_string(e) + ": drive 0 ("), std::string::npos)
        << e << ": " << r.recovered;
    EXPECT_NE(r.recovered.find("; read from drive 1 instead"), std::string::npos) << e << ": " << r.recovered;
    EXPECT_EQ(trace_of(trace, 3, e)["drives"], nlohmann::json::array({1})) << e;
  }
}

// A read split over two replicas fails its CRC: which copy is bad is unknown,
// so it is read again from one drive at a time; the bad one is found.
TEST_P(ReaderTest, CorruptCopyInASplitReadIsFound) {
  TestDrives drives(2);
  const uint64_t size = 2 * kChunk;
  const std::string want = drives.put(1, 3, 7, size);
  std::string bad = want;
  bad[5] ^= 0x40;  // in chunk 0, which drive 0 serves in the first (split) attempt
  drives.put_raw(0, 3, 7, bad);
  TestRead read;
  std::vector<DriveStatus> status;
  ReadResult r = read_replicated_once(drives, 3, 7, size, want, read, status);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(same_bytes(read, want));
  EXPECT_NE(r.recovered.find(": CRC-32C mismatch (got 0x"), std::string::npos) << r.recovered;
  auto rec = trace_of(read_trace(trace_path()), 3, 7);
  EXPECT_EQ(rec["drives"], nlohmann::json::array({1}));
  EXPECT_TRUE(rec["ok"].get<bool>());
  EXPECT_EQ(rec["error"], r.recovered);
  // Split attempt (one chunk each), drive 0 alone (both chunks), drive 1 alone.
  EXPECT_EQ(status[0].counters.bytes, 3 * kChunk);
  EXPECT_EQ(status[1].counters.bytes, 3 * kChunk);
}

TEST_P(ReaderTest, FaultWithoutReplicaNamesLayerExpertDriveAndPath) {
  TestDrives drives(2);
  const std::string good = test::expert_bytes(3, 19, 4096);
  drives.put_raw(0, 3, 18, good.substr(0, 1000));  // E017 is missing
  std::string bad = good;
  bad[100] ^= 1;
  drives.put_raw(0, 3, 19, bad);
  const std::string big = test::expert_bytes(3, 20, 2 * kChunk + 5);
  std::string bad0 = big, bad1 = big;
  bad0[10] ^= 1;
  bad1[10] ^= 2;
  bad1[kChunk + 10] ^= 1;
  drives.put_raw(0, 3, 20, bad0);  // bad on both drives (a split read may not pick good parts of each)
  drives.put_raw(1, 3, 20, bad1);
  Monitor monitor(2);
  monitor.open_trace(trace_path());
  Results results;
  std::vector<TestRead> reads(4);
  {
    ExpertReader reader(drives.specs(), options(2), &monitor);
    reads[0].ticket = reader.submit(make_request(drives, 3, 17, {0}, 4096, &reads[0], &results));
    reads[1].ticket = reader.submit(make_request(drives, 3, 18, {0}, 4096, &reads[1], &results));
    ReadRequest rq = make_request(drives, 3, 19, {0}, 4096, &reads[2], &results);
    rq.crc32c = crc32c(good.data(), good.size());
    reads[2].ticket = reader.submit(std::move(rq));
    rq = make_request(drives, 3, 20, {0, 1}, big.size(), &reads[3], &results);
    rq.crc32c = crc32c(big.data(), big.size());
    reads[3].ticket = reader.submit(std::move(rq));
    results.wait(4);
  }
  monitor.close_trace();
  results.expect_once();
  const std::string d0 = "drive 0 (" + drives.root(0) + ") ", d1 = "drive 1 (" + drives.root(1) + ") ";
  auto expect_error = [&](int i, int64_t expert, std::vector<std::string> needles) {
    ReadResult r = results.get(reads[i].ticket);
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.cancelled);
    needles.push_back("layer 3 expert " + std::to_string(expert) + ": ");
    needles.push_back("; no replica left");
    for (const auto& n : needles) EXPECT_NE(r.error.find(n), std::string::npos) << "lacks \"" << n << "\": " << r.error;
  };
  expect_error(0, 17, {d0 + drives.path(0, 3, 17) + ": cannot open: No such file or directory"});
  expect_error(1, 18, {d0 + drives.path(0, 3, 18) + ": file is 1000 bytes, expected 4096"});
  expect_error(2, 19, {d0 + drives.path(0, 3, 19) + ": CRC-32C mismatch"});
  expect_error(3, 20, {d0 + drives.path(0, 3, 20) + ": CRC-32C mismatch", d1 + drives.path(1, 3, 20) + ": CRC-32C mismatch"});
  auto trace = read_trace(trace_path());
  auto rec = trace_of(trace, 3, 20);
  EXPECT_FALSE(rec["ok"].get<bool>());
  EXPECT_NE(rec["error"].get<std::string>().find("no replica left"), std::string::npos);
  EXPECT_EQ(rec["drives"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(trace_of(trace, 3, 17)["drive"], 0);
}

TEST_P(ReaderTest, DestructorCancelsQueuedPrefetchesAndFinishesDemand) {
  TestDrives drives(1);
  const std::string want = drives.put(0, 0, 0, 2 * kChunk);
  drives.put(0, 0, 1, 2 * kChunk);
  Results results;
  TestRead demand, prefetch;
  {
    ExpertReader reader(drives.specs(), options(1), nullptr);
    reader.pause_dispatch(true);
    prefetch.ticket =
        reader.submit(make_request(drives, 0, 1, {0}, 2 * kChunk, &prefetch, &results, ReadPriority::Prefetch));
    demand.ticket = reader.submit(make_request(drives, 0, 0, {0}, 2 * kChunk, &demand, &results));
  }
  EXPECT_EQ(results.size(), 2u);
  results.expect_once();
  EXPECT_TRUE(results.get(demand.ticket).ok);
  EXPECT_TRUE(same_bytes(demand, want));
  EXPECT_TRUE(results.get(prefetch.ticket).cancelled);
  EXPECT_TRUE(untouched(prefetch));
}

TEST_P(ReaderTest, OnDoneMaySubmitMore) {
  TestDrives drives(1);
  const std::string a = drives.put(0, 0, 0, 5000), b = drives.put(0, 0, 1, 7000);
  Results results;
  TestRead first, second;
  {
    ExpertReader reader(drives.specs(), options(1), nullptr);
    ReadRequest rq = make_request(drives, 0, 0, {0}, 5000, &first, &results);
    auto inner = rq.on_done;
    ReadRequest next = make_request(drives, 0, 1, {0}, 7000, &second, &results);
    rq.on_done = [&, inner](const ReadResult& r) {
      second.ticket = reader.submit(std::move(next));
      inner(r);
    };
    first.ticket = reader.submit(std::move(rq));
    results.wait(2);
  }
  EXPECT_TRUE(same_bytes(first, a));
  EXPECT_TRUE(same_bytes(second, b));
}

// Read outcomes no healthy drive gives on demand, injected under both
// backends (io/test_hooks.h); the hooks are reset when the test ends.
struct ReadFaults {
  ReadFaults() = default;
  ReadFaults(const ReadFaults&) = delete;
  ReadFaults& operator=(const ReadFaults&) = delete;
  ~ReadFaults() {
    io_test_hooks::set_short_reads(0);
    io_test_hooks::set_read_result(0, 0);
  }
};

// Every read comes back short: the rest of each chunk is read until it is
// whole (direct reads continue from a 4096-byte boundary, buffered ones from
// any byte), and the bytes are exact. The hook scribbles over what a short
// read did not deliver, so a short read taken for a whole one shows.
TEST_P(ReaderTest, ShortReadsAreReadOnToTheEnd) {
  std::string why;
  REQUIRE_CAPABILITY("O_DIRECT", test::direct_io_here(&why), why);
  TestDrives drives(1);
  const std::vector<uint64_t> sizes = {1, 4095, 4097, 3 * 4096 + 5, kChunk, kChunk + 1, 3 * kChunk + 100};
  std::vector<std::string> want;
  for (size_t i = 0; i < sizes.size(); ++i) want.push_back(drives.put(0, 1, static_cast<int64_t>(i), sizes[i]));
  ReadFaults faults;
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct, 4096-byte reads" : "buffered, 1000-byte reads");
    io_test_hooks::set_short_reads(direct ? 4096 : 1000);
    Results results;
    std::vector<TestRead> reads(sizes.size());
    {
      ExpertReader reader(drives.specs(), options(2, direct), nullptr);
      check_engine(reader);
      submit_each_size(reader, drives, sizes, want, reads, results);
      results.wait(sizes.size());
      EXPECT_EQ(reader.drive_status()[0].direct, direct);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      ReadResult r = results.get(reads[i].ticket);
      EXPECT_TRUE(r.ok) << "size " << sizes[i] << ": " << r.error;
      EXPECT_TRUE(same_bytes(reads[i], want[i])) << "size " << sizes[i];
    }
  }
}

// A direct read that stops short of a 4096-byte boundary before the file's
// end cannot be continued (the next direct read must start aligned): the read
// fails naming the short read.
TEST_P(ReaderTest, AnUnalignedShortDirectReadIsAnError) {
  std::string why;
  REQUIRE_CAPABILITY("O_DIRECT", test::direct_io_here(&why), why);
  TestDrives drives(1);
  drives.put(0, 2, 3, 10000);
  ReadFaults faults;
  io_test_hooks::set_short_reads(1000);
  Results results;
  TestRead read;
  {
    ExpertReader reader(drives.specs(), options(1), nullptr);
    read.ticket = reader.submit(make_request(drives, 2, 3, {0}, 10000, &read, &results));
    results.wait(1);
  }
  const ReadResult r = results.get(read.ticket);
  EXPECT_FALSE(r.ok);
  for (const std::string& n : {std::string("layer 2 expert 3: "), "drive 0 (" + drives.root(0) + ") " + drives.path(0, 2, 3),
                               std::string(": short read: got 1000 of 10000 bytes at offset 0"), std::string("no replica left")})
    EXPECT_NE(r.error.find(n), std::string::npos) << "lacks \"" << n << "\": " << r.error;
}

// A read error (EIO) fails the read naming the offset, drive and path; with a
// replica the read is served from it and the failure is reported.
TEST_P(ReaderTest, AReadErrorNamesTheOffsetAndAReplicaServes) {
  TestDrives drives(2);
  const uint64_t size = 2 * kChunk + 123;
  const std::string want = drives.put(0, 4, 1, size);
  drives.put(1, 4, 1, size);
  ReadFaults faults;
  Results results;
  TestRead alone, replicated;
  {
    // Drive 1 a million times slower: every first attempt goes to drive 0.
    ExpertReader reader(drives.specs({1e9, 1e3}), options(1), nullptr);
    io_test_hooks::set_read_result(-EIO, 1);
    alone.ticket = reader.submit(make_request(drives, 4, 1, {0}, size, &alone, &results));
    results.wait(1);
    io_test_hooks::set_read_result(-EIO, 1);
    ReadRequest rq = make_request(drives, 4, 1, {0, 1}, size, &replicated, &results);
    rq.crc32c = crc32c(want.data(), want.size());
    replicated.ticket = reader.submit(std::move(rq));
    results.wait(2);
  }
  const std::string on_drive0 = "drive 0 (" + drives.root(0) + ") " + drives.path(0, 4, 1) + ": read at offset 0 failed: " +
                                std::strerror(EIO);
  const ReadResult a = results.get(alone.ticket);
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.error.find("layer 4 expert 1: " + on_drive0), std::string::npos) << a.error;
  EXPECT_NE(a.error.find("no replica left"), std::string::npos) << a.error;
  const ReadResult b = results.get(replicated.ticket);
  EXPECT_TRUE(b.ok) << b.error;
  EXPECT_TRUE(same_bytes(replicated, want));
  EXPECT_NE(b.recovered.find(on_drive0), std::string::npos) << b.recovered;
  EXPECT_NE(b.recovered.find("; read from drive 1 instead"), std::string::npos) << b.recovered;
}

// A file that ends before its size said (a read returning 0), and one that
// holds more than it said (a read returning more than is left): each fails
// the read saying so.
TEST_P(ReaderTest, AFileThatEndsEarlyOrRunsLongFailsTheRead) {
  TestDrives drives(1);
  drives.put(0, 5, 0, 3 * kChunk);
  drives.put(0, 5, 1, 5000);
  ReadFaults faults;
  Results results;
  TestRead early, longer;
  {
    ExpertReader reader(drives.specs(), options(1), nullptr);
    io_test_hooks::set_read_result(0, 1);
    early.ticket = reader.submit(make_request(drives, 5, 0, {0}, 3 * kChunk, &early, &results));
    results.wait(1);
    io_test_hooks::set_read_result(8192, 1);
    longer.ticket = reader.submit(make_request(drives, 5, 1, {0}, 5000, &longer, &results));
    results.wait(2);
  }
  const ReadResult a = results.get(early.ticket), b = results.get(longer.ticket);
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.error.find(drives.path(0, 5, 0) + ": short read: got 0 of " + std::to_string(kChunk) +
                         " bytes at offset 0 (file ended)"),
            std::string::npos)
      << a.error;
  EXPECT_FALSE(b.ok);
  EXPECT_NE(b.error.find(drives.path(0, 5, 1) + ": file holds more than the expected 5000 bytes"), std::string::npos)
      << b.error;
}

// An interrupted read (EINTR, EAGAIN) is issued again: the read succeeds.
TEST_P(ReaderTest, AnInterruptedReadIsIssuedAgain) {
  TestDrives drives(1);
  const std::string want = drives.put(0, 6, 2, 2 * kChunk + 7);
  ReadFaults faults;
  for (int err : {EINTR, EAGAIN}) {
    SCOPED_TRACE(std::strerror(err));
    Results results;
    TestRead read;
    {
      ExpertReader reader(drives.specs(), options(1), nullptr);
      io_test_hooks::set_read_result(-err, 3);
      read.ticket = reader.submit(make_request(drives, 6, 2, {0}, want.size(), &read, &results));
      results.wait(1);
    }
    const ReadResult r = results.get(read.ticket);
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.recovered, "");
    EXPECT_TRUE(same_bytes(read, want));
  }
}

TEST(IoEngineName, ParsesAndNames) {
  EXPECT_EQ(parse_io_engine("uring"), IoEngine::Uring);
  EXPECT_EQ(parse_io_engine("pread"), IoEngine::Pread);
  EXPECT_STREQ(io_engine_name(IoEngine::Uring), "uring");
  EXPECT_STREQ(io_engine_name(IoEngine::Pread), "pread");
  EXPECT_FAILS_WITH(parse_io_engine("aio"), "\"aio\"", "uring", "pread");
}

// Where io_uring is refused (EPERM in a container), the reader uses the pread
// pool and says why.
TEST(ReaderFallback, UringRefusedFallsBackToPread) {
  TestDrives drives(1);
  const std::string want = drives.put(0, 0, 0, 10000);
  io_test_hooks::set_uring_init_error(EPERM);
  Results results;
  TestRead read;
  {
    ReaderOptions o;
    o.engine = IoEngine::Uring;
    ExpertReader reader(drives.specs(), o, nullptr);
    io_test_hooks::set_uring_init_error(0);
    EXPECT_EQ(reader.engine(), IoEngine::Pread);
    EXPECT_NE(reader.engine_note().find("io_uring unavailable"), std::string::npos) << reader.engine_note();
    // A build without liburing never tries: its note says so instead.
    EXPECT_NE(reader.engine_note().find(io_uring_built() ? "Operation not permitted" : "this build has no io_uring"),
              std::string::npos)
        << reader.engine_note();
    read.ticket = reader.submit(make_request(drives, 0, 0, {0}, 10000, &read, &results));
    results.wait(1);
  }
  EXPECT_TRUE(same_bytes(read, want));
}

// Where O_DIRECT is refused (EINVAL, as tmpfs did before Linux 6.6), reads
// go buffered and the drive says so, once.
TEST(ReaderFallback, DirectRefusedFallsBackToBuffered) {
  for (IoEngine engine : {IoEngine::Uring, IoEngine::Pread}) {
    if (!test::engine_here(engine)) continue;
    SCOPED_TRACE(io_engine_name(engine));
    TestDrives drives(1);
    std::vector<std::string> want;
    for (int e = 0; e < 3; ++e) want.push_back(drives.put(0, 0, e, 3 * kChunk + 11 * e));
    io_test_hooks::set_direct_open_error(EINVAL);
    Results results;
    std::vector<TestRead> reads(3);
    std::vector<DriveStatus> status;
    {
      ReaderOptions o;
      o.engine = engine;
      o.chunk_bytes = kChunk;
      ExpertReader reader(drives.specs(), o, nullptr);
      EXPECT_EQ(reader.engine(), engine) << reader.engine_note();
      for (int e = 0; e < 3; ++e)
        reads[e].ticket = reader.submit(make_request(drives, 0, e, {0}, want[e].size(), &reads[e], &results));
      results.wait(3);
      status = reader.drive_status();
    }
    io_test_hooks::set_direct_open_error(0);
    for (int e = 0; e < 3; ++e) EXPECT_TRUE(same_bytes(reads[e], want[e])) << e;
    EXPECT_FALSE(status[0].direct);
    EXPECT_NE(status[0].note.find("direct I/O refused on " + drives.root(0)), std::string::npos) << status[0].note;
    EXPECT_NE(status[0].note.find("POSIX_FADV_DONTNEED"), std::string::npos) << status[0].note;
  }
}

TEST(ExpertReaderChecks, RejectsBadOptionsAndRequests) {
  TestDrives drives(2);
  ReaderOptions o;
  o.chunk_bytes = 5000;
  EXPECT_FAILS_WITH(ExpertReader(drives.specs(), o, nullptr), "chunk size 5000", "4096");
  o = ReaderOptions();
  o.queue_depth = 0;
  EXPECT_FAILS_WITH(ExpertReader(drives.specs(), o, nullptr), "queue depth 0");
  EXPECT_FAILS_WITH(ExpertReader({}, ReaderOptions(), nullptr), "no drives");
  EXPECT_FAILS_WITH(ExpertReader(drives.specs({1e9, 0}), ReaderOptions(), nullptr), "drive 1", "bandwidth");

  ExpertReader reader(drives.specs(), ReaderOptions(), nullptr);
  Results results;
  TestRead read;
  ReadRequest rq = make_request(drives, 4, 9, {0}, 100, &read, &results);
  rq.drives = {0, 2};
  rq.paths.push_back("x");
  EXPECT_FAILS_WITH(reader.submit(rq), "layer 4 expert 9", "drive index 2");
  rq.drives = {1, 1};
  EXPECT_FAILS_WITH(reader.submit(rq), "drive 1 is listed twice");
  rq.drives = {0};
  EXPECT_FAILS_WITH(reader.submit(rq), "1 drives but 2 paths");
  rq.paths.pop_back();
  rq.dest = read.buf.get() + 8;
  EXPECT_FAILS_WITH(reader.submit(rq), "not 4096-byte aligned");
  EXPECT_EQ(results.size(), 0u);
}

}  // namespace
}  // namespace deltafin
