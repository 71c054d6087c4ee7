// An independent float64 forward pass of the Qwen3 dense architecture, written
// straight from the definitions (Hugging Face Qwen3ForCausalLM) with plain
// loops and no KV cache: every call recomputes the whole sequence. It reads
// config.json and the safetensors files itself, so it shares no code with the
// runtime's config parser, loader or kernels; only the weights' BF16 values
// are common ground.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace deltafin::test {

class ReferenceQwen3 {
public:
  explicit ReferenceQwen3(const std::string& checkpoint_dir);

  // Logits of every position of `tokens`, [T, vocab] row-major.
  std::vector<double> logits(const std::vector<uint32_t>& tokens) const;
  int64_t vocab() const { return vocab_; }

private:
  const std::vector<double>& tensor(const std::string& name) const;

  int64_t hidden_ = 0, intermediate_ = 0, layers_ = 0, heads_ = 0, kv_heads_ = 0, head_dim_ = 0, vocab_ = 0;
  double eps_ = 0, theta_ = 0;
  bool tied_ = false;
  std::map<std::string, std::vector<double>> tensors_;  // every tensor, widened to double
};

}  // namespace deltafin::test
