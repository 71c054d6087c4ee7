// The registry's load half: a model of whichever family config.json or
// store.json names, behind LoadedModel. The registry itself
// (model/registry.h) sits below the engine and knows families by name; this
// part sits above every family's loader (src/model/<family>/load/) and the
// drafters (drafter_factory.h), so front ends link one part and name no
// family.
#pragma once

#include <memory>
#include <string>

#include "load/engine_options.h"
#include "load/loaded_model.h"

namespace deltafin {

// The family store.json names.
std::unique_ptr<LoadedModel> load_store(const std::string& store_dir, const EngineOptions& options);
// The family config.json names (a target family; draft-only ones are refused).
std::unique_ptr<LoadedModel> load_resident(const std::string& dir, int threads, const BackendChoice& backend = {});
// The checkpoint or the store `source` names (an error unless exactly one).
std::unique_ptr<LoadedModel> load_model(const ModelSource& source);

}  // namespace deltafin
