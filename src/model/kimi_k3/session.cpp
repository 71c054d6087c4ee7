#include "model/kimi_k3/session.h"

#include <algorithm>

#include "util/error.h"

namespace deltafin {

K3Session::K3Session(const K3Config& config) : config_(&config) { reset(); }

void K3Session::reset() {
  const K3Config& c = *config_;
  const size_t layers = static_cast<size_t>(c.num_hidden_layers);
  kda_.assign(layers, {});
  mla_.assign(layers, {});
  const size_t D = static_cast<size_t>(c.kda_dim()), kernel = static_cast<size_t>(c.short_conv_kernel_size);
  const size_t K = static_cast<size_t>(c.kda_head_dim), H = static_cast<size_t>(c.kda_num_heads);
  for (size_t i = 0; i < layers; ++i) {
    if (c.layer_kinds[i] != LayerKind::KDA) continue;
    kda_[i].conv_q.assign(D * kernel, 0.0f);
    kda_[i].conv_k.assign(D * kernel, 0.0f);
    kda_[i].conv_v.assign(D * kernel, 0.0f);
    kda_[i].recurrent.assign(H * K * K, 0.0f);
  }
  length_ = 0;
}

K3Session::Snapshot K3Session::snapshot() const { return Snapshot{length_, kda_}; }

void K3Session::restore(const Snapshot& s) {
  if (s.length > length_) fail("session: cannot restore a snapshot of length ", s.length, " into a session of length ", length_);
  kda_ = s.kda;
  cut_mla(s.length);
}

void K3Session::rollback(const Snapshot& before, int64_t length) {
  if (before.length > length || length > length_)
    fail("session: cannot roll back to length ", length, " from a snapshot of length ", before.length,
         " in a session of length ", length_);
  kda_ = before.kda;
  cut_mla(length);
}

void K3Session::cut_mla(int64_t length) {
  const K3Config& c = *config_;
  const size_t width = static_cast<size_t>(c.kv_lora_rank + c.qk_rope_head_dim);
  for (size_t i = 0; i < mla_.size(); ++i) {
    if (c.layer_kinds[i] != LayerKind::MLA) continue;
    mla_[i].latent.resize(static_cast<size_t>(length) * width);
  }
  length_ = length;
}

uint64_t K3Session::bytes() const {
  uint64_t n = 0;
  for (const KdaState& k : kda_) n += (k.conv_q.size() * 3 + k.recurrent.size()) * sizeof(float);
  for (const MlaCache& m : mla_) n += m.latent.size() * sizeof(float);
  return n;
}

void K3Session::plan_length(int64_t positions) {
  const K3Config& c = *config_;
  const size_t width = static_cast<size_t>(c.kv_lora_rank + c.qk_rope_head_dim);
  for (size_t i = 0; i < mla_.size(); ++i) {
    if (c.layer_kinds[i] != LayerKind::MLA) continue;
    mla_[i].latent.reserve(static_cast<size_t>(std::max<int64_t>(positions, 0)) * width);
  }
}

uint64_t K3Session::fixed_bytes(const K3Config& c) {
  const uint64_t D = static_cast<uint64_t>(c.kda_dim()), kernel = static_cast<uint64_t>(c.short_conv_kernel_size);
  const uint64_t K = static_cast<uint64_t>(c.kda_head_dim), H = static_cast<uint64_t>(c.kda_num_heads);
  uint64_t kda_layers = 0;
  for (LayerKind k : c.layer_kinds) kda_layers += k == LayerKind::KDA;
  return kda_layers * (3 * D * kernel + H * K * K) * sizeof(float);
}

uint64_t K3Session::bytes_per_position(const K3Config& c) {
  uint64_t mla_layers = 0;
  for (LayerKind k : c.layer_kinds) mla_layers += k != LayerKind::KDA;
  return mla_layers * static_cast<uint64_t>(c.kv_lora_rank + c.qk_rope_head_dim) * sizeof(float);
}

}  // namespace deltafin
