// PLACEHOLDER while the foundation is being written; replaced before landing.
#include "cli/commands.h"
#include "util/error.h"
namespace deltafin::cli {
Command add_tokenize(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("tokenize", "(not yet written)");
  return {sub, [] () -> int { fail("not yet written"); }};
}
}  // namespace deltafin::cli
