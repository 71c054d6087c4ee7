#include "model/common/spine_source.h"

#include <cmath>
#include <cstring>

#include "util/error.h"
#include "util/numeric.h"

namespace deltafin {

void attach_fp8_scales(Matrix& m, const std::string& name, const std::string& where, DType dtype,
                       const std::vector<uint64_t>& shape, std::vector<uint8_t> bytes) {
  const std::vector<uint64_t> grid{(m.rows + 127) / 128, (m.cols + 127) / 128};
  if (dtype != DType::F32 || shape != grid)
    fail(where, ": tensor '", fp8_scale_name(name), "' is ", dtype_name(dtype), " of another shape than F32 [", grid[0],
         ", ", grid[1], "] (the 128 x 128 block scales of '", name, "')");
  for (size_t i = 0; i < bytes.size(); i += 4) {
    float v;
    std::memcpy(&v, &bytes[i], 4);
    if (!std::isfinite(v) || !(v > 0))
      fail(where, ": tensor '", fp8_scale_name(name), "' holds ", v, " at block ", i / 4, "; a block scale must be finite and > 0");
  }
  m.scales = std::move(bytes);
}

TensorRef CheckpointSpineSource::find(const std::string& name) const {
  TensorRef t = c_.find(name);
  if (!t) fail(c_.dir(), ": tensor '", name, "' not found");
  return t;
}

Matrix CheckpointSpineSource::matrix(const std::string& name) {
  TensorRef t = find(name);
  if ((t.info->dtype != DType::BF16 && t.info->dtype != DType::F8_E4M3) || t.info->shape.size() != 2)
    fail(t.shard->path(), ": tensor '", name, "' is ", dtype_name(t.info->dtype), " of rank ", t.info->shape.size(),
         ", expected BF16 or F8_E4M3 of rank 2 (a matrix)");
  Matrix m;
  m.type = t.info->dtype == DType::BF16 ? WeightType::BF16 : WeightType::FP8Block;
  m.rows = t.info->shape[0];
  m.cols = t.info->shape[1];
  m.storage.resize(t.info->bytes());
  t.shard->read(*t.info, m.storage.data());
  if (m.type == WeightType::FP8Block) {
    TensorRef s = find(fp8_scale_name(name));
    std::vector<uint8_t> bytes(s.info->bytes());
    s.shard->read(*s.info, bytes.data());
    attach_fp8_scales(m, name, s.shard->path(), s.info->dtype, s.info->shape, std::move(bytes));
  }
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
