// The DSpark draft model (k3-model.md §10.2): K3's official speculative
// drafter. Accepted target rows (the target's h after a few of its layers,
// captured by K3Model) are injected as attention keys/values; a proposal runs
// 7 query rows [anchor, MASK x 6] through DSpark's decoder layers in one pass
// and scores them with the TARGET's lm_head plus a low-rank Markov bias on
// the previous token. BF16 numerics throughout (model/k3_dspark/numerics.h).
// DSpark only proposes: the target verifies every token (§10.1).
#pragma once

#include <cstdint>
#include <vector>

#include "model/kimi_k3/model.h"  // Rows
#include "model/kimi_k3/weights.h"
#include "model/k3_dspark/config.h"
#include "model/k3_dspark/weights.h"
#include "model/k3_dspark/yarn.h"

namespace deltafin {

class ThreadPool;

class DSparkModel {
public:
  // `weights` and `target` must outlive the model (they are not copied).
  DSparkModel(const DSparkConfig& config, const DSparkWeights& weights, const K3Weights& target, ThreadPool* pool);

  const std::vector<int64_t>& target_layers() const { return c_.target_layer_ids; }  // for K3Model::set_capture_layers
  // Appends `rows` accepted target rows from captured [>= rows, n_targets*hidden] (K3Model::captured()),
  // the first at absolute position context_length().
  void append_context(const Rows& captured, size_t rows);
  void truncate_context(int64_t length);  // drop rows at positions >= length
  int64_t context_length() const { return length_; }

  struct Proposal {
    std::vector<uint32_t> tokens;   // d_1 .. d_n
    std::vector<float> confidence;  // the confidence head's logit per proposed token (stats only)
  };
  // anchor = the latest target-emitted token (position context_length()); 1 <= n <= 7.
  Proposal propose(uint32_t anchor, int n);

  // Inspection (tests, stats). The compact cache of one DSpark layer:
  // [context_length, kv_lora + rope] rows of normalised latent ‖ rotated k_r.
  const std::vector<float>& context_cache(int64_t layer) const { return cache_[static_cast<size_t>(layer)]; }
  // The last propose(): the 7 final-norm rows out_j [7, h], and the scores
  // logits_j + bias_j [n, V] whose argmax gave d_{j+1}.
  const Rows& last_output() const { return last_output_; }
  const Rows& last_scores() const { return last_scores_; }

private:
  // MLA of one layer over the 7 query rows (dspark_attention.cpp). x: the
  // normalised input [7, h]; out: [7, h]. The query rows sit at positions
  // context_length() ... context_length() + 6.
  void attention(int64_t layer, const Rows& x, Rows& out);
  void mlp(int64_t layer, const Rows& x, Rows& out);
  // kv_a_proj_with_mqa · x, then the normalised latent and the rotated k_r,
  // written as rows [latent ‖ k_r] (the form both the cache and the query rows use).
  void latent_rows(int64_t layer, const Rows& x, int64_t first_position, Rows& out);
  size_t key_width() const { return static_cast<size_t>(c_.kv_lora_rank + c_.qk_rope_head_dim); }

  DSparkConfig c_;
  const DSparkWeights& w_;
  const K3Weights& target_;
  ThreadPool* pool_;
  DSparkYarn yarn_;
  float eps_;
  // Per layer, W_k of every head transposed, [H, kv_lora, nope] BF16: the
  // absorbed query q_nope·W_k is then an ordinary product W_kᵀ·q_nope.
  std::vector<Matrix> w_k_t_;
  int64_t length_ = 0;
  std::vector<std::vector<float>> cache_;  // per layer, [length_, key_width()]
  Rows last_output_, last_scores_;
};

}  // namespace deltafin
