// A progress line for long jobs (checkpoint generation, setup, prefetch):
// bytes done, rate and ETA, at most about once a second, on stderr. On a
// terminal the line is redrawn in place; in a log each update is a new line.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace deltafin {

class Progress {
public:
  Progress(std::string label, uint64_t total_bytes, bool enabled = true);
  void add(uint64_t bytes);
  void finish();  // prints the final line (total, time, mean rate)
  double seconds() const;

private:
  void print(bool final_line);
  std::string label_;
  uint64_t total_, done_ = 0;
  bool enabled_, tty_;
  std::chrono::steady_clock::time_point start_, last_;
};

std::string human_bytes(double bytes);  // "17.5 MB" (decimal units, as drives are sold)

}  // namespace deltafin
