#include "model/common/family_checkpoint.h"

#include "util/error.h"

namespace deltafin {

uint64_t FamilyCheckpoint::record_bytes() const {
  uint64_t n = 0;
  for (const RecordPart& p : record_layout()) n += p.bytes;
  return n;
}

std::vector<RecordPart> record_parts(const std::vector<TensorSpec>& tensors, const std::string& prefix) {
  std::vector<RecordPart> out;
  uint64_t at = 0;
  for (const TensorSpec& t : tensors) {
    if (t.name.rfind(prefix, 0) != 0) fail("record layout: tensor ", t.name, " does not start with ", prefix);
    out.push_back({t.name.substr(prefix.size()), std::string(dtype_name(t.dtype)), t.shape, at, t.bytes()});
    at += t.bytes();
  }
  return out;
}

}  // namespace deltafin
