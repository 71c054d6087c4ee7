// Subcommand registry. Each subcommand lives in its own cmd_<name>.cpp and
// registers itself here through a CommandSpec.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace deltafin::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

void register_commands(CLI::App& app);
int run_selected(CLI::App& app);

// The command line as main() got it, for `bench --json`. Kept from argv rather
// than read back from /proc/self/cmdline, which only Linux has: one way on
// every system.
void record_command_line(int argc, char** argv);
const std::vector<std::string>& recorded_command_line();

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

}  // namespace deltafin::cli
