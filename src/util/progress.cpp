#include "util/progress.h"

#include <unistd.h>

#include <cstdio>

namespace deltafin {

std::string human_bytes(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000.0 && u < 4) b /= 1000.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

Progress::Progress(std::string label, uint64_t total_bytes, bool enabled)
    : label_(std::move(label)), total_(total_bytes), enabled_(enabled), tty_(::isatty(2) == 1) {
  start_ = last_ = std::chrono::steady_clock::now();
}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::add(uint64_t bytes) {
  done_ += bytes;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ >= std::chrono::seconds(1)) {
    last_ = now;
    print(false);
  }
}

void Progress::finish() { print(true); }

void Progress::print(bool final_line) {
  if (!enabled_) return;
  std::fflush(stdout);  // keep stdout's lines and the progress line in order
  double s = seconds();
  double rate = s > 0 ? done_ / s : 0;
  if (final_line) {
    std::fprintf(stderr, "%s%s: %s in %.1f s (%s/s)\n", tty_ ? "\r" : "", label_.c_str(), human_bytes(done_).c_str(), s,
                 human_bytes(rate).c_str());
    return;
  }
  double pct = total_ ? 100.0 * done_ / total_ : 100.0;
  double eta = rate > 0 && total_ > done_ ? (total_ - done_) / rate : 0;
  std::fprintf(stderr, "%s%s: %s / %s (%.1f%%), %s/s, ETA %.0f s%s", tty_ ? "\r" : "", label_.c_str(),
               human_bytes(done_).c_str(), human_bytes(total_).c_str(), pct, human_bytes(rate).c_str(), eta,
               tty_ ? "   " : "\n");
  std::fflush(stderr);
}

}  // namespace deltafin
