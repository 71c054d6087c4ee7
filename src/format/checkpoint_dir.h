// The output directory of a checkpoint generator (make-model for K3, DSpark
// and Qwen3): it must not silently mix a new checkpoint with an old one.
#pragma once

#include <string>

namespace deltafin {

// config.json, model.safetensors.index.json or model*.safetensors.
bool is_checkpoint_file(const std::string& name);

// Creates `dir`; refuses a directory holding checkpoint files unless `force`,
// and with it removes them (config.json first, so an interrupted overwrite
// never looks like a complete checkpoint), so the new one is complete and alone.
void prepare_checkpoint_dir(const std::string& dir, bool force);

}  // namespace deltafin
