// Which compute backend runs a model: the CPU (the default) or a Vulkan
// device, as --backend / --device / --device-memory or the environment
// (DELTAFIN_BACKEND, DELTAFIN_DEVICE) choose. Every backend gives the same
// bits (backend.h), so the choice changes speed, never output.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "util/thread_pool.h"

namespace deltafin {

struct BackendChoice {
  std::string kind = "cpu";  // "cpu" or "vulkan"
  std::string device;        // vulkan: an index or part of a name; "" the first GPU
  double device_memory_gb = 0;  // vulkan: device memory the weights may take (0: 90 % of it)
  bool kind_from_env = false;   // kind came from DELTAFIN_BACKEND (its error names it)
};

// The environment's choice (DELTAFIN_BACKEND, DELTAFIN_DEVICE), else the CPU.
BackendChoice backend_choice_from_env();

// An error naming the value unless kind is cpu or vulkan.
void check_backend_kind(const std::string& kind);

// A backend as chosen; pool runs the CPU backend's ops (and a device
// backend's host-side steps). Errors name the device and the fix (no
// driver, no device, built without Vulkan).
std::unique_ptr<Backend> make_backend(const BackendChoice& choice, ThreadPool* pool);

bool vulkan_backend_built();

// For the lines a run prints: "" for the CPU backend; for a device, which
// one (and how its fma is formed), and where the parts ran: the spine bytes
// on the device, the bytes staged per use from RAM (experts, what did not
// fit, session state), submits and dispatches so far.
std::string backend_description(const Backend& backend);
std::string backend_placement(const Backend& backend);

// `deltafin devices`: every Vulkan device with what matters to deltafin, as
// text lines or JSON; `check` also runs each usable device's contract check
// (vulkan_contract.h): whether its ops give the CPU's bits.
std::string describe_devices(bool check);
std::string describe_devices_json(bool check);

}  // namespace deltafin
