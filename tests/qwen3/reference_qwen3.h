// An independent float64 forward pass of the Qwen3 architectures, written
// straight from the definitions (Hugging Face Qwen3ForCausalLM and
// Qwen3MoeForCausalLM: Qwen3MoeSparseMoeBlock, the decoder layer's choice of
// sparse or dense MLP, _compute_yarn_parameters) with plain loops and no KV
// cache: every call recomputes the whole sequence. It reads config.json and
// the safetensors files itself, so it shares no code with the runtime's
// config parser, loader, router or kernels; only the weights' BF16 values
// are common ground. MoE layers sum the experts in expert-id order, as
// transformers does, not in the runtime's routing order.
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

  std::vector<double> mlp(const std::string& prefix, const std::vector<double>& h, size_t width) const;
  std::vector<double> sparse_moe(const std::string& prefix, const std::vector<double>& h) const;

  int64_t hidden_ = 0, intermediate_ = 0, layers_ = 0, heads_ = 0, kv_heads_ = 0, head_dim_ = 0, vocab_ = 0;
  double eps_ = 0, theta_ = 0;
  bool tied_ = false;
  // RoPE: per pair the inverse frequency (YaRN applied) and the cos/sin factor.
  std::vector<double> inv_freq_;
  double rope_factor_ = 1;
  // Qwen3-MoE: which layers are sparse, and the block's parameters.
  std::vector<bool> sparse_;
  int64_t experts_ = 0, top_k_ = 0, moe_intermediate_ = 0;
  bool norm_topk_ = false;
  std::map<std::string, std::vector<double>> tensors_;  // every tensor, widened to double
};

}  // namespace deltafin::test
