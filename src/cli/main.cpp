// The deltafin command: one binary, one subcommand per job.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  deltafin::cli::record_command_line(argc, argv);
  CLI::App app{"deltafin: run Kimi K3-architecture MoE models with experts streamed from SSD"};
  app.require_subcommand(1);
  deltafin::cli::register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return deltafin::cli::run_selected(app);
  } catch (const deltafin::Error& e) {
    std::fprintf(stderr, "deltafin: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deltafin: internal error: %s\n", e.what());
    return 2;
  }
}
