// An independent float64 DSpark (k3-model.md §10.2), written straight from
// the spec for tests: plain loops, every value a double, no BF16 rounding,
// and the NON-absorbed MLA form (per-head keys and values expanded from the
// cached latent with kv_b_proj explicitly). It reads config.json and the
// safetensors files itself and shares no code with src/model/k3_dspark.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deltafin::test {

using Vec = std::vector<double>;

class ReferenceDSpark {
public:
  // dspark_dir: config.json + model.safetensors; target_dir: the K3 checkpoint
  // whose embedding and lm_head DSpark uses.
  ReferenceDSpark(const std::string& dspark_dir, const std::string& target_dir);

  // Appends captured target rows (width num_target_layers·h), positions
  // context_length() onwards.
  void append_context(const std::vector<Vec>& rows);
  size_t context_length() const { return latent_.empty() ? 0 : latent_[0].size(); }
  // The cached normalised latent and rotated k_r of one layer, per position.
  const std::vector<Vec>& latent(int layer) const { return latent_[layer]; }
  const std::vector<Vec>& k_rope(int layer) const { return k_rope_[layer]; }

  struct Result {
    std::vector<Vec> out;           // [7][h]: final-norm rows
    std::vector<Vec> scores;        // [n][V]: logits_j + bias_j
    std::vector<uint32_t> tokens;   // argmax of each row (first on ties)
    std::vector<double> margin;     // top-1 minus top-2 score of each row
    std::vector<double> confidence; // confidence logit of each row
  };
  // Scores rows 0..n-1 with prev_j = anchor for j = 0, else prev[j - 1]
  // (pass the tokens to condition on; the reference's own argmax is in
  // Result::tokens). prev.size() >= n - 1.
  Result propose(uint32_t anchor, int n, const std::vector<uint32_t>& prev) const;

  int hidden() const { return h_; }
  int vocab() const { return V_; }

private:
  Vec rope_rotate(const Vec& x, double position) const;

  std::string dir_;
  int h_ = 0, V_ = 0, layers_ = 0, heads_ = 0, q_lora_ = 0, kv_lora_ = 0, nope_ = 0, rope_ = 0, dv_ = 0;
  int inter_ = 0, rank_ = 0, mask_ = 0;
  double eps_ = 0, scale_ = 0;
  Vec inv_freq_;
  Vec embed_, lm_head_;  // the target's [V][h]
  struct Layer {
    Vec in_norm, post_norm, q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b, o, gate, up, down;
  };
  std::vector<Layer> L_;
  Vec context_proj_, context_norm_, final_norm_, w1_, w2_, conf_w_;
  double conf_b_ = 0;
  std::vector<std::vector<Vec>> latent_, k_rope_;  // [layer][position]
};

}  // namespace deltafin::test
