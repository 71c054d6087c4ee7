#include "model/kimi_k3/session_file.h"

#include <cstring>

#include "util/error.h"

namespace deltafin {

namespace {

// The floats of each part of one layer's state, in file order.
struct LayerSizes {
  size_t conv = 0, recurrent = 0, latent_per_position = 0;
};

LayerSizes layer_sizes(const K3Config& c, size_t layer) {
  LayerSizes s;
  if (c.layer_kinds[layer] == LayerKind::KDA) {
    s.conv = static_cast<size_t>(c.kda_dim() * c.short_conv_kernel_size);
    s.recurrent = static_cast<size_t>(c.kda_num_heads * c.kda_head_dim * c.kda_head_dim);
  } else {
    s.latent_per_position = static_cast<size_t>(c.kv_lora_rank + c.qk_rope_head_dim);
  }
  return s;
}

static_assert(sizeof(float) == 4, "fp32 state");  // stored as held: x86-64 and ARM64 are little-endian

}  // namespace

uint64_t session_state_bytes(const K3Config& c, int64_t length) {
  uint64_t floats = 0;
  for (size_t l = 0; l < c.layer_kinds.size(); ++l) {
    const LayerSizes s = layer_sizes(c, l);
    floats += 3 * s.conv + s.recurrent + s.latent_per_position * static_cast<uint64_t>(length);
  }
  return floats * 4;
}

void for_each_state_part(const K3Config& c, const K3Session::Snapshot& kda, const K3Session& session, int64_t length,
                         const std::function<void(const float*, size_t)>& part) {
  if (kda.length != length) fail("session state: the KDA snapshot is at ", kda.length, ", not at ", length);
  if (session.length() < length) fail("session state: the session holds ", session.length(), " positions, not ", length);
  for (size_t l = 0; l < c.layer_kinds.size(); ++l) {
    const LayerSizes z = layer_sizes(c, l);
    if (c.layer_kinds[l] == LayerKind::KDA) {
      const KdaState& k = kda.kda[l];
      part(k.conv_q.data(), z.conv);
      part(k.conv_k.data(), z.conv);
      part(k.conv_v.data(), z.conv);
      part(k.recurrent.data(), z.recurrent);
    } else {
      part(session.mla(static_cast<int64_t>(l)).latent.data(), z.latent_per_position * static_cast<size_t>(length));
    }
  }
}

void read_state_parts(const K3Config& c, int64_t length, K3Session& session,
                      const std::function<void(float*, size_t)>& read) {
  if (session.length() != 0) fail("session state: restore needs a fresh session");
  auto take = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    read(v.data(), n);
  };
  for (size_t l = 0; l < c.layer_kinds.size(); ++l) {
    const LayerSizes z = layer_sizes(c, l);
    if (c.layer_kinds[l] == LayerKind::KDA) {
      KdaState& k = session.kda(static_cast<int64_t>(l));
      take(k.conv_q, z.conv);
      take(k.conv_k, z.conv);
      take(k.conv_v, z.conv);
      take(k.recurrent, z.recurrent);
    } else {
      take(session.mla(static_cast<int64_t>(l)).latent, z.latent_per_position * static_cast<size_t>(length));
    }
  }
  session.advance(length);
}

}  // namespace deltafin
