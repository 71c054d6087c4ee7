#include "experts/route_trace.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace deltafin {

namespace {
constexpr const char* kMagic = "deltafin-route-trace";
constexpr size_t kFlushBytes = 1 << 20;
}  // namespace

RouteTraceWriter::RouteTraceWriter(const std::string& path, int64_t layers, int64_t experts, int64_t top_k)
    : file_(path) {
  buf_ = std::string(kMagic) + " 1 layers=" + std::to_string(layers) + " experts=" + std::to_string(experts) +
         " top_k=" + std::to_string(top_k) + "\n";
}

void RouteTraceWriter::begin_pass(size_t positions) {
  buf_ += "P " + std::to_string(positions) + "\n";
  if (buf_.size() >= kFlushBytes) flush();
}

void RouteTraceWriter::routes(int64_t layer, std::span<const Route> routes) {
  for (const Route& r : routes) {
    buf_ += "R " + std::to_string(layer);
    for (int64_t e : r.experts) buf_ += " " + std::to_string(e);
    buf_ += "\n";
  }
  if (buf_.size() >= kFlushBytes) flush();
}

void RouteTraceWriter::flush() {
  file_.write(buf_.data(), buf_.size());
  buf_.clear();
}

void RouteTraceWriter::commit() {
  flush();
  file_.commit();
}

namespace {
int64_t header_field(const std::string& path, const std::string& token, const std::string& name) {
  const std::string prefix = name + "=";
  if (token.rfind(prefix, 0) != 0) fail(path, ":1: expected ", name, "=N, found \"", token, "\"");
  try {
    size_t used = 0;
    const long long v = std::stoll(token.substr(prefix.size()), &used);
    if (used != token.size() - prefix.size() || v < 1) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    fail(path, ":1: ", name, " must be a positive whole number, found \"", token, "\"");
  }
}
}  // namespace

RouteTrace read_route_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open the route trace");
  RouteTrace t;
  std::string line;
  if (!std::getline(in, line)) fail(path, ": empty file, not a route trace");
  {
    std::istringstream h(line);
    std::string magic, version, l, e, k;
    h >> magic >> version >> l >> e >> k;
    if (magic != kMagic) fail(path, ":1: not a deltafin route trace (the first line starts \"", kMagic, "\")");
    if (version != "1") fail(path, ":1: route trace version \"", version, "\"; this build reads version 1");
    t.layers = header_field(path, l, "layers");
    t.experts = header_field(path, e, "experts");
    t.top_k = header_field(path, k, "top_k");
  }
  size_t n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    std::istringstream s(line);
    std::string tag;
    s >> tag;
    if (tag == "P") {
      int64_t positions = 0;
      if (!(s >> positions) || positions < 1) fail(path, ":", n, ": a pass needs a positive number of positions");
      t.passes.push_back({positions, {}, {}});
    } else if (tag == "R") {
      if (t.passes.empty()) fail(path, ":", n, ": a route before the first pass (P line)");
      RouteTrace::Pass& p = t.passes.back();
      int64_t layer = -1;
      if (!(s >> layer) || layer < 0 || layer >= t.layers)
        fail(path, ":", n, ": layer must be 0 to ", t.layers - 1);
      int64_t e = 0, count = 0;
      while (s >> e) {
        if (e < 0 || e >= t.experts) fail(path, ":", n, ": expert ", e, " is not one of 0 to ", t.experts - 1);
        p.experts.push_back(e);
        ++count;
      }
      if (!s.eof()) fail(path, ":", n, ": an expert id is not a whole number");
      if (count != t.top_k) fail(path, ":", n, ": a route of ", count, " experts; the trace's top_k is ", t.top_k);
      p.layer.push_back(layer);
    } else {
      fail(path, ":", n, ": unknown record \"", tag, "\" (P or R)");
    }
  }
  return t;
}

}  // namespace deltafin
