#include "engine/loaded_model.h"

#include <algorithm>
#include <sstream>

#include "util/error.h"
#include "util/progress.h"

namespace deltafin {

void LoadedModel::save_heat() {
  if (heat && !store_dir.empty()) heat->save(store_dir);
}

std::string LoadedModel::describe() const {
  std::ostringstream o;
  o << (family ? family->name : "?") << "; spine " << spine_format;
  if (spine_format != "bf16") o << " (NOT weight-exact: int8-row spine)";
  if (!stream) {
    o << "; experts resident";
  } else {
    o << "; experts streamed from " << manifest->drives.size() << " drive(s), cache "
      << human_bytes(static_cast<double>(memory.cache_bytes())) << ", lookahead "
      << lookahead_mode_name(route_lookahead() ? route_lookahead()->mode() : LookaheadMode::Off) << ", io "
      << io_engine_name(stream->reader().engine());
    if (const ExpertFetcher* f = stream->fetcher()) {
      o << "; missing experts fetched from " << f->url() << " (" << f->local_experts() << " on the drives";
      if (f->disk_budget_bytes()) o << ", disk budget " << human_bytes(static_cast<double>(f->disk_budget_bytes()));
      o << ")";
    }
  }
  return o.str();
}

}  // namespace deltafin
