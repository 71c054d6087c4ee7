// The deltafin command: one binary, one subcommand per job.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  deltafin::cli::record_command_line(argc, argv);
  // Named here, not from argv[0], so the help reads the same wherever the
  // binary lies (docs/cli.md is generated from it).
  CLI::App app{"deltafin: run Mixture-of-Experts language models (Kimi K3, Qwen3-MoE) with their experts streamed from "
               "SSD or a mirror; the model decides every token",
               "deltafin"};
  app.footer(R"(Every subcommand takes --help. How a model is run never changes an output bit: experts resident or
streamed (from drives or a mirror), any ISA (scalar, AVX2, AVX-512, NEON), thread count, prefill slice or
batch size, speculative or plain decoding give the same tokens and logits. The one model change is an
int8-row spine (setup --spine int8, or auto when BF16 does not fit), which every run announces.
Documentation: README.md and docs/ (docs/cli.md is this help, generated).)");
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
