// Subcommand registry. Each subcommand lives in its own cmd_<name>.cpp and
// registers itself here through a CommandSpec.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace deltafin::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// Sets the help's format (allowed values and default in words after each
// option's description) and adds every subcommand.
void register_commands(CLI::App& app);
int run_selected(CLI::App& app);

// The command line as main() got it, for `bench --json`. Kept from argv rather
// than read back from /proc/self/cmdline, which only Linux has: one way on
// every system.
void record_command_line(int argc, char** argv);
const std::vector<std::string>& recorded_command_line();

// Checks of option values whose errors a person reads. CLI11 puts the
// option's name in front: `--max-new -3` says
//   --max-new: -3 is not allowed: give a whole number from 0 to 1000000000
// and `--cache-gb abc` says
//   --cache-gb: "abc" is not a number: give one of at least 0
// The description each carries ("0 to 7") is what the help shows. Every
// numeric option takes one of these, so no value reaches CLI11's own
// conversion, whose errors speak of neither the range nor the value's kind.
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
// A whole number in [lo, hi] (hi = kNoLimit: no upper bound), given with
// ->transform(), not ->check(): it rewrites what it accepts as plain digits
// for CLI11's conversion, which would read "010" as octal 8 and cannot read
// "1e3" (a thousand here), and only a transform may change the value.
CLI::Validator whole_number(int64_t lo, int64_t hi = kNoLimit);
// A finite number in [lo, hi] (hi infinite: no upper bound).
CLI::Validator number(double lo, double hi = std::numeric_limits<double>::infinity());
// A finite number greater than lo.
CLI::Validator number_above(double lo);
// One of these words, exactly.
CLI::Validator one_of(std::vector<std::string> words);

// Limits shared by several commands' options.
constexpr int64_t kMaxTokens = 1'000'000'000;  // token counts and positions
constexpr int64_t kMaxThreads = 4096;
constexpr int64_t kMaxPrefillRows = int64_t{1} << 20;

// One function per subcommand; defined in cmd_<name>.cpp.
Command add_inspect(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_make_model(CLI::App& app);
Command add_run(CLI::App& app);
Command add_logits(CLI::App& app);
Command add_setup(CLI::App& app);
Command add_prefetch(CLI::App& app);
Command add_doctor(CLI::App& app);
Command add_serve(CLI::App& app);
Command add_trace_plot(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_bench_chart(CLI::App& app);
Command add_cache_sim(CLI::App& app);
Command add_devices(CLI::App& app);

}  // namespace deltafin::cli
