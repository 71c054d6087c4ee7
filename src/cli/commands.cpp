#include "cli/commands.h"

#include <vector>

namespace deltafin::cli {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

std::vector<std::string>& command_line_words() {
  static std::vector<std::string> words;
  return words;
}
}  // namespace

void record_command_line(int argc, char** argv) { command_line_words().assign(argv, argv + argc); }

const std::vector<std::string>& recorded_command_line() { return command_line_words(); }

void register_commands(CLI::App& app) {
  registry() = {add_run(app), add_logits(app), add_make_model(app), add_inspect(app), add_tokenize(app),
                add_setup(app), add_prefetch(app), add_doctor(app), add_serve(app), add_trace_plot(app),
                add_bench(app), add_bench_chart(app)};
}

int run_selected(CLI::App& /*app*/) {
  for (const Command& c : registry())
    if (c.app->parsed()) return c.run();
  return 2;
}

}  // namespace deltafin::cli
