// PLACEHOLDER while the foundation is being written; replaced before landing.
#include "cli/commands.h"
#include "util/error.h"
namespace deltafin::cli {
Command add_make_model(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("make-model", "(not yet written)");
  return {sub, [] () -> int { fail("not yet written"); }};
}
}  // namespace deltafin::cli
