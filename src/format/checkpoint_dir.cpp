#include "format/checkpoint_dir.h"

#include <filesystem>
#include <vector>

#include "util/error.h"

namespace deltafin {

namespace fs = std::filesystem;

bool is_checkpoint_file(const std::string& name) {
  const std::string ext = ".safetensors";
  return name == "config.json" || name == "model.safetensors.index.json" ||
         (name.rfind("model", 0) == 0 && name.size() > ext.size() &&
          name.compare(name.size() - ext.size(), ext.size(), ext) == 0);
}

void prepare_checkpoint_dir(const std::string& dir, bool force) {
  fs::create_directories(dir);
  std::vector<fs::path> old;
  for (const auto& e : fs::directory_iterator(dir))
    if (is_checkpoint_file(e.path().filename().string())) old.push_back(e.path());
  if (old.empty()) return;
  if (!force)
    fail(dir, ": already holds checkpoint files (", old.front().filename().string(),
         " ...); pass --force to overwrite them");
  fs::remove(fs::path(dir) / "config.json");
  for (const fs::path& p : old) fs::remove(p);
}

}  // namespace deltafin
