#include "model/common/spine_source.h"

#include <cstring>

#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

TensorRef CheckpointSpineSource::find(const std::string& name) const {
  TensorRef t = c_.find(name);
  if (!t) fail(c_.dir(), ": tensor '", name, "' not found");
  return t;
}

Matrix CheckpointSpineSource::matrix(const std::string& name) {
  TensorRef t = find(name);
  if (t.info->dtype != DType::BF16 || t.info->shape.size() != 2)
    fail(t.shard->path(), ": tensor '", name, "' is ", dtype_name(t.info->dtype), " of rank ", t.info->shape.size(),
         ", expected BF16 of rank 2 (a matrix)");
  Matrix m;
  m.type = WeightType::BF16;
  m.rows = t.info->shape[0];
  m.cols = t.info->shape[1];
  m.storage.resize(t.info->bytes());
  t.shard->read(*t.info, m.storage.data());
  return m;
}

std::vector<float> CheckpointSpineSource::vec(const std::string& name) {
  TensorRef t = find(name);
  std::vector<uint8_t> raw(t.info->bytes());
  t.shard->read(*t.info, raw.data());
  std::vector<float> out(t.info->elements());
  if (t.info->dtype == DType::F32) {
    std::memcpy(out.data(), raw.data(), raw.size());
  } else if (t.info->dtype == DType::BF16) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(load_u16le(&raw[2 * i]));
  } else {
    fail(t.shard->path(), ": tensor '", name, "' is ", dtype_name(t.info->dtype), ", expected BF16 or F32");
  }
  return out;
}

}  // namespace deltafin
