// Helpers for the io tests: expert files on temp-dir "drives", buffers, a
// collector for on_done results and a trace reader.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/aligned_buffer.h"
#include "io/expert_reader.h"
#include "support/test_support.h"
#include "util/crc32c.h"

namespace deltafin::test {

// Deterministic bytes for (layer, expert, size).
inline std::string expert_bytes(int64_t layer, int64_t expert, uint64_t size) {
  std::string s(size, '\0');
  uint64_t x = 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(layer) << 32) ^ static_cast<uint64_t>(expert) ^ size;
  for (uint64_t i = 0; i < size; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

inline std::string expert_rel(int64_t layer, int64_t expert) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "deltafin-experts/L%03lld/E%03lld.bin", static_cast<long long>(layer),
                static_cast<long long>(expert));
  return buf;
}

// N drives, each a temp dir holding deltafin-experts/L###/E###.bin files.
class TestDrives {
public:
  explicit TestDrives(int n) {
    for (int i = 0; i < n; ++i) dirs_.push_back(std::make_unique<TempDir>());
  }
  const std::string& root(int d) const { return dirs_[static_cast<size_t>(d)]->path(); }
  std::string path(int d, int64_t layer, int64_t expert) const { return root(d) + "/" + expert_rel(layer, expert); }
  // Writes the expert's bytes (or `bytes` when given) on drive d.
  std::string put(int d, int64_t layer, int64_t expert, uint64_t size) const {
    std::string b = expert_bytes(layer, expert, size);
    put_raw(d, layer, expert, b);
    return b;
  }
  void put_raw(int d, int64_t layer, int64_t expert, const std::string& bytes) const {
    const std::string p = path(d, layer, expert);
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    write_bytes(p, bytes);
  }
  std::vector<DriveSpec> specs(std::vector<double> bw = {}) const {
    std::vector<DriveSpec> out;
    for (size_t i = 0; i < dirs_.size(); ++i) out.push_back({dirs_[i]->path(), i < bw.size() ? bw[i] : 1e9});
    return out;
  }

private:
  std::vector<std::unique_ptr<TempDir>> dirs_;
};

// Collects on_done results; counts calls per ticket.
class Results {
public:
  std::function<void(const ReadResult&)> callback() {
    return [this](const ReadResult& r) {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_[r.ticket];
      results_[r.ticket] = r;
      cv_.notify_all();
    };
  }
  // Waits (at most 30 s, then fails) until n results are in.
  void wait(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return results_.size() >= n; }))
      ADD_FAILURE() << "timed out waiting for " << n << " reads; have " << results_.size();
  }
  ReadResult get(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = results_.find(ticket);
    if (it == results_.end()) {
      ADD_FAILURE() << "no result for ticket " << ticket;
      return {};
    }
    return it->second;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return results_.size();
  }
  // Every ticket got exactly one call.
  void expect_once() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [t, n] : calls_) EXPECT_EQ(n, 1) << "ticket " << t;
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, ReadResult> results_;
  std::map<uint64_t, int> calls_;
};

// One read: its buffer (pre-filled with 0xAA) and the request.
struct TestRead {
  AlignedBuffer buf;
  uint64_t bytes = 0;
  uint64_t ticket = 0;
  std::string want;
};

inline ReadRequest make_request(const TestDrives& drives, int64_t layer, int64_t expert, std::vector<int> on,
                                uint64_t bytes, TestRead* read, Results* results,
                                ReadPriority prio = ReadPriority::Demand) {
  read->bytes = bytes;
  read->buf = make_aligned_buffer(bytes);
  std::memset(read->buf.get(), 0xAA, round_up_direct(bytes == 0 ? 1 : bytes));
  ReadRequest rq;
  rq.layer = layer;
  rq.expert = expert;
  rq.priority = prio;
  rq.drives = on;
  for (int d : on) rq.paths.push_back(drives.path(d, layer, expert));
  rq.bytes = bytes;
  rq.dest = read->buf.get();
  rq.on_done = results->callback();
  return rq;
}

inline bool same_bytes(const TestRead& r, const std::string& want) {
  return want.size() == r.bytes && std::memcmp(r.buf.get(), want.data(), want.size()) == 0;
}

inline bool untouched(const TestRead& r) {
  for (uint64_t i = 0; i < round_up_direct(r.bytes == 0 ? 1 : r.bytes); ++i)
    if (r.buf[i] != 0xAA) return false;
  return true;
}

// The trace's lines of one kind: reads and hits (default), or the per-drive
// "drive_bins" lines written when the trace closes.
inline std::vector<nlohmann::json> read_trace(const std::string& path, bool bins = false) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      if ((j.value("t", "") == "drive_bins") == bins) out.push_back(std::move(j));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trace line is not JSON: " << line << " (" << e.what() << ")";
    }
  }
  return out;
}

// The trace record of (layer, expert) (the first one; fails when absent).
inline nlohmann::json trace_of(const std::vector<nlohmann::json>& trace, int64_t layer, int64_t expert) {
  for (const auto& j : trace)
    if (j.value("t", "") == "read" && j.value("layer", -1) == layer && j.value("expert", -1) == expert) return j;
  ADD_FAILURE() << "no trace record for layer " << layer << " expert " << expert;
  return nlohmann::json::object();
}

}  // namespace deltafin::test
