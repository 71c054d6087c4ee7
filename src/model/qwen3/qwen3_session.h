// One sequence's state for the Qwen3 draft model: the fp32 keys and values of
// every position so far, per layer. Speculative decoding rolls a draft back
// by truncating the cache to the accepted length; because a position's cached
// K/V depend only on the tokens before it, truncate(n) followed by new tokens
// gives exactly the state a fresh session fed the same tokens would have.
#pragma once

#include <cstdint>
#include <vector>

#include "model/common/causal_model.h"
#include "model/qwen3/qwen3_config.h"

namespace deltafin {

class Qwen3Session : public ModelSession {
public:
  // capacity: the most positions this session may hold; 0 = the config's
  // max_position_embeddings (RoPE is only trained that far). Memory grows
  // with the length actually used, not with the capacity.
  explicit Qwen3Session(const Qwen3Config& config, int64_t capacity = 0);

  int64_t length() const override { return length_; }  // positions cached
  int64_t capacity() const { return capacity_; }
  int64_t layers() const { return static_cast<int64_t>(keys_.size()); }
  int64_t kv_dim() const { return kv_dim_; }  // floats per position per layer (KV heads x head_dim)

  // Drops every position at or after `length` (0 <= length <= length(),
  // else an Error); the kept positions are untouched.
  // The cache's bytes now, and per position without making a session (fp32
  // keys and values of every layer: layers x kv_dim x 2 x 4 bytes).
  uint64_t bytes() const override { return static_cast<uint64_t>(length_) * bytes_per_position_; }
  static uint64_t bytes_per_position(const Qwen3Config& config) {
    return static_cast<uint64_t>(config.num_hidden_layers) * config.kv_dim() * 2 * sizeof(float);
  }

  void truncate(int64_t length);
  void reset() { truncate(0); }
  void plan_length(int64_t positions) override;  // every layer's keys and values

  // Used by Qwen3Model::forward: make room for n more positions (Error past
  // capacity), then the rows of layer l, position p ([kv_dim] floats each),
  // then commit them. Rows in [length(), length() + n) exist only between
  // reserve() and commit().
  void reserve(int64_t n);
  void commit(int64_t n);
  float* keys(int64_t layer, int64_t position) { return keys_[layer].data() + position * kv_dim_; }
  float* values(int64_t layer, int64_t position) { return values_[layer].data() + position * kv_dim_; }
  const float* keys(int64_t layer, int64_t position) const { return keys_[layer].data() + position * kv_dim_; }
  const float* values(int64_t layer, int64_t position) const { return values_[layer].data() + position * kv_dim_; }

private:
  int64_t kv_dim_ = 0, capacity_ = 0, length_ = 0;
  uint64_t bytes_per_position_ = 0;
  std::vector<std::vector<float>> keys_, values_;  // [layer][position * kv_dim + i]
};

}  // namespace deltafin
