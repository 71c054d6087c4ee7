// The session of a family whose whole state is a per-layer cache of rows
// per position (grouped-query keys and values: Qwen3, Qwen3-MoE; a latent
// MLA cache has the same shape), and the CausalModel half every such family
// shares: marks are lengths, rewinding truncates (a position's cached rows
// depend only on the tokens before it, so truncate(n) followed by new
// tokens gives exactly a fresh session's state), copies take the marked
// rows, states on disk are the rows layer by layer, and verification keeps
// a prefix by truncating. Written once here; a family adds forward().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/common/causal_model.h"

namespace deltafin {

class KvSession : public ModelSession {
public:
  // capacity: the most positions this session may hold (> 0). Memory grows
  // with the length actually used, not with the capacity. parts: 2 for
  // keys and values, 1 for a latent cache (MLA: one row per position,
  // latent(l) for the backend; the values are then absent).
  KvSession(int64_t layers, int64_t kv_dim, int64_t capacity, int parts = 2);

  int64_t length() const override { return length_; }  // positions cached
  int64_t capacity() const { return capacity_; }
  int64_t layers() const { return static_cast<int64_t>(keys_.size()); }
  int64_t kv_dim() const { return kv_dim_; }  // floats per position per layer, each of keys and values
  int parts() const { return values_.empty() ? 1 : 2; }

  // The cache's bytes now, and per position (keys and values of every
  // layer: layers x kv_dim x 2 x 4 bytes).
  uint64_t bytes() const override {
    return static_cast<uint64_t>(length_) * bytes_per_position(layers(), kv_dim_, parts());
  }
  static uint64_t bytes_per_position(int64_t layers, int64_t kv_dim, int parts = 2) {
    return static_cast<uint64_t>(layers) * static_cast<uint64_t>(kv_dim) * static_cast<uint64_t>(parts) * sizeof(float);
  }

  // Drops every position at or after `length` (0 <= length <= length(),
  // else an Error); the kept positions are untouched.
  void truncate(int64_t length);
  void reset() { truncate(0); }
  void plan_length(int64_t positions) override;  // every layer's keys and values

  // A forward pass: make room for n more positions (Error past capacity),
  // write rows of layer l at positions from length() on (layer(l) for the
  // backend), then commit them. Rows in [length(), length() + n) exist only
  // between reserve() and commit().
  void reserve(int64_t n);
  void commit(int64_t n);
  // A latent session's layer l: rows of rank + rope floats (rank + rope = kv_dim).
  LatentLayer latent(int64_t l, size_t rank) {
    return {keys_[static_cast<size_t>(l)].data(), rank, static_cast<size_t>(kv_dim_) - rank};
  }
  KvLayer layer(int64_t l) {
    return {keys_[static_cast<size_t>(l)].data(), values_[static_cast<size_t>(l)].data(), static_cast<size_t>(kv_dim_)};
  }
  float* keys(int64_t layer, int64_t position) { return keys_[layer].data() + position * kv_dim_; }
  float* values(int64_t layer, int64_t position) { return values_[layer].data() + position * kv_dim_; }
  const float* keys(int64_t layer, int64_t position) const { return keys_[layer].data() + position * kv_dim_; }
  const float* values(int64_t layer, int64_t position) const { return values_[layer].data() + position * kv_dim_; }

  // Speculative verification's pass, from KvCacheModel::forward_verify
  // until keep_verified: the session's own, so passes of several sessions
  // can be verified and kept in any order. Not part of the cached state.
  struct Verification {
    int64_t start = 0;  // the length before the pass
    size_t rows = 0;    // its rows; 0: no pass to keep
  };
  Verification& verification() { return verification_; }

private:
  int64_t kv_dim_ = 0, capacity_ = 0, length_ = 0;
  Verification verification_;
  std::vector<std::vector<float>> keys_, values_;  // [layer][position * kv_dim + i]
};

// CausalModel's session half for KvSessions (everything but forward). The
// family names itself in errors and makes its sessions; a state is the
// cache's first `length` positions: per layer in order, the keys then the
// values ([length, kv_dim] fp32 each; a latent cache has only the first).
class KvCacheModel : public CausalModel {
public:
  std::unique_ptr<ModelSession> new_session() const override { return make_session(0); }
  std::shared_ptr<SessionMark> mark(const ModelSession& session) const override;
  void rewind(ModelSession& session, const SessionMark& mark) const override;
  std::unique_ptr<ModelSession> copy_at(const ModelSession& session, const SessionMark& at) const override;
  uint64_t state_values(int64_t length) const override;
  void for_each_state_part(const ModelSession& session, const SessionMark& at, const StatePartFn& part) const override;
  void read_state(ModelSession& fresh, int64_t length, const StateReadFn& read) const override;
  // A pass with every row's logits; keep_verified truncates to its first rows.
  Rows forward_verify(ModelSession& session, std::span<const uint32_t> tokens) override;
  void keep_verified(ModelSession& session, size_t rows) override;

protected:
  KvCacheModel(std::string family, int64_t layers, int64_t kv_dim, int parts = 2)
      : family_(std::move(family)), layers_(layers), kv_dim_(kv_dim), parts_(parts) {}
  // A fresh session of this model's shape; capacity 0 = the model's context.
  virtual std::unique_ptr<KvSession> make_session(int64_t capacity) const = 0;
  // The family's session behind a family-neutral one (an error naming this
  // family for another's, or for one of another shape).
  KvSession& kv_session(ModelSession& session) const;
  const KvSession& kv_session(const ModelSession& session) const;

private:
  void check_mark(const SessionMark& mark, const KvSession& s) const;
  std::string family_;
  int64_t layers_ = 0, kv_dim_ = 0;
  int parts_ = 2;
};

}  // namespace deltafin
