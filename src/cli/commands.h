// Subcommand registry. Each subcommand lives in its own cmd_<name>.cpp and
// registers itself here through a CommandSpec.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>

namespace deltafin::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

void register_commands(CLI::App& app);
int run_selected(CLI::App& app);

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
