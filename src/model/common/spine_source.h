// Where a family's loader gets the spine's tensors: a Hugging Face checkpoint
// (as released) or a deltafin store's spine files (BF16 or int8-row), by the
// checkpoint's tensor names. The loader checks every shape against its config.
#pragma once

#include <string>
#include <vector>

#include "format/checkpoint.h"
#include "model/common/matrix.h"

namespace deltafin {

class SpineTensorSource {
public:
  virtual ~SpineTensorSource() = default;
  // A rank-2 matrix in its stored type: BF16, Int8Row in an int8-row
  // spine, or FP8Block for an F8_E4M3 tensor X, whose block scales are the
  // release's F32 tensor X_scale_inv [ceil(rows/128), ceil(cols/128)]
  // (DeepSeek V3's layout: "w.weight" and "w.weight_scale_inv").
  virtual Matrix matrix(const std::string& name) = 0;
  // A BF16 or F32 tensor of any shape, widened to fp32 exactly.
  virtual std::vector<float> vec(const std::string& name) = 0;
};

// Reads the spine straight from the checkpoint's shards (the resident path).
// The FP8 half of matrix(): checks X_scale_inv (F32 of the block grid of
// `m`, every scale finite and > 0) and stores its bytes as m.scales.
// `where` names the file in errors.
void attach_fp8_scales(Matrix& m, const std::string& name, const std::string& where, DType scale_dtype,
                       const std::vector<uint64_t>& scale_shape, std::vector<uint8_t> scale_bytes);
inline std::string fp8_scale_name(const std::string& matrix) { return matrix + "_scale_inv"; }

class CheckpointSpineSource : public SpineTensorSource {
public:
  explicit CheckpointSpineSource(const Checkpoint& checkpoint) : c_(checkpoint) {}
  Matrix matrix(const std::string& name) override;
  std::vector<float> vec(const std::string& name) override;

private:
  TensorRef find(const std::string& name) const;
  const Checkpoint& c_;
};

}  // namespace deltafin
