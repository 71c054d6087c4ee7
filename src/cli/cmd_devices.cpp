// `deltafin devices`: the Vulkan devices this machine offers, with what
// decides whether deltafin's shaders keep the CPU's bits on them (fp64,
// the float controls the driver promises) and, with --check, the contract
// check's verdict (backend/vulkan/vulkan_contract.h).
#include <cstdio>
#include <memory>

#include "backend/select/make_backend.h"
#include "cli/commands.h"

namespace deltafin::cli {

namespace {

struct DevicesOptions {
  bool check = false, json = false;
};

int run_devices(const DevicesOptions& o) {
  const std::string text = o.json ? describe_devices_json(o.check) + "\n" : describe_devices(o.check);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

Command add_devices(CLI::App& app) {
  auto options = std::make_shared<DevicesOptions>();
  CLI::App* sub = app.add_subcommand("devices", "List the Vulkan devices deltafin can compute on (--backend vulkan)");
  sub->footer(R"(Each device: its index and name (what --device takes), type, driver, Vulkan version, device memory,
subgroup size, and the float controls its driver promises for fp32 (subnormals kept or flushed,
round-to-nearest-even). --check runs the contract check on each usable device: a few ops of every kind
on the device and on the CPU, compared bit for bit, and whether subnormal results keep their bits
(docs/vulkan.md). Without a Vulkan driver it says which package to install.)");
  sub->add_flag("--check", options->check, "Run the contract check on each usable device");
  sub->add_flag("--json", options->json, "Print JSON instead of text");
  return {sub, [options]() -> int { return run_devices(*options); }};
}

}  // namespace deltafin::cli
