// deltafin inspect: load and validate a checkpoint, print what it is (the
// family's own description: model/registry.h describe_checkpoint).
#include <string>

#include "cli/commands.h"
#include "model/registry.h"

namespace deltafin::cli {

namespace {

struct InspectArgs {
  std::string model;
  bool verify_experts = false;
};

}  // namespace

Command add_inspect(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand("inspect", "Load and validate a checkpoint and describe it");
  sub->footer(R"(Loads config.json and every shard (the family from config.json), checks the config rules and every
tensor's name, dtype and shape (K3: all problems reported at once) and, with --verify-experts, every
expert record (K3: every MXFP4 scale byte); prints the architecture, sizes, and the session memory at
32k, 128k and 1M positions.)");
  sub->add_option("--model", a->model, "Hugging Face checkpoint directory")->required();
  sub->add_flag("--verify-experts", a->verify_experts, "Check every expert record (K3: every MXFP4 scale, k3-model.md 4.3; Qwen3-MoE: dtypes and shapes)");
  return {sub, [a] {
            describe_checkpoint(a->model, a->verify_experts);
            return 0;
          }};
}

}  // namespace deltafin::cli
