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
  // A rank-2 matrix in its stored type (BF16, or Int8Row in an int8-row spine).
  virtual Matrix matrix(const std::string& name) = 0;
  // A BF16 or F32 tensor of any shape, widened to fp32 exactly.
  virtual std::vector<float> vec(const std::string& name) = 0;
};

// Reads the spine straight from the checkpoint's shards (the resident path).
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
