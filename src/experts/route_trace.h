// Route traces: every position's route of every MoE layer, as a run computed
// them, in the order it computed them (issue 35). The cache studies replay
// them offline: each policy, and Belady's optimum, sees the same sequence.
// Resident and streamed runs give the same trace (routes do not depend on
// where experts come from), so traces are taken from fast resident runs.
//
// The file is text, one record per line:
//   deltafin-route-trace 1 layers=L experts=E top_k=K
//   P <positions>                 a forward pass of that many positions begins
//   R <layer> <e0> ... <e(K-1)>   one position's route at a MoE layer
// A decoded token is "P 1" and one R line per MoE layer; a prefill slice of
// n rows is n R lines per layer, rows in order. The file is written under a
// temporary name and renamed when the run ends, so no half trace is left.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/common/route.h"
#include "util/file.h"

namespace deltafin {

class RouteTraceWriter : public RouteObserver {
public:
  RouteTraceWriter(const std::string& path, int64_t layers, int64_t experts, int64_t top_k);
  void begin_pass(size_t positions) override;
  void routes(int64_t layer, std::span<const Route> routes) override;
  // Writes what is buffered and renames the file into place; without it
  // (an error, a crash) nothing is left under `path`.
  void commit();

private:
  void flush();
  AtomicFile file_;
  std::string buf_;
};

struct RouteTrace {
  int64_t layers = 0, experts = 0, top_k = 0;
  // One entry per forward pass: its positions, and its routes in file order.
  struct Pass {
    int64_t positions = 0;
    std::vector<int64_t> layer;    // [route]
    std::vector<int64_t> experts;  // [route * top_k + slot]
  };
  std::vector<Pass> passes;
};

// Reads a trace; errors name the file and line and what is wrong (an expert
// or layer out of range, a route of the wrong length, a route before any pass).
RouteTrace read_route_trace(const std::string& path);

}  // namespace deltafin
