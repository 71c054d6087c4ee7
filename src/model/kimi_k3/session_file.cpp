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

static_assert(sizeof(float) == 4, "fp32 state");

void put(std::vector<uint8_t>& out, const float* v, size_t n) {
  const size_t at = out.size();
  out.resize(at + n * 4);
  std::memcpy(out.data() + at, v, n * 4);  // x86-64 and ARM64 are little-endian: the file's order
}

}  // namespace

uint64_t session_state_bytes(const K3Config& c, int64_t length) {
  uint64_t floats = 0;
  for (size_t l = 0; l < c.layer_kinds.size(); ++l) {
    const LayerSizes s = layer_sizes(c, l);
    floats += 3 * s.conv + s.recurrent + s.latent_per_position * static_cast<uint64_t>(length);
  }
  return floats * 4;
}

std::vector<uint8_t> encode_session_state(const K3Config& c, const K3Session::Snapshot& kda, const K3Session& session,
                                          int64_t length) {
  if (kda.length != length) fail("session state: the KDA snapshot is at ", kda.length, ", not at ", length);
  if (session.length() < length) fail("session state: the session holds ", session.length(), " positions, not ", length);
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(session_state_bytes(c, length)));
  for (size_t l = 0; l < c.layer_kinds.size(); ++l) {
    const LayerSizes z = layer_sizes(c, l);
    if (c.layer_kinds[l] == LayerKind::KDA) {
      const KdaState& k = kda.kda[l];
      put(out, k.conv_q.data(), z.conv);
      put(out, k.conv_k.data(), z.conv);
      put(out, k.conv_v.data(), z.conv);
      put(out, k.recurrent.data(), z.recurrent);
    } else {
      put(out, session.mla(static_cast<int64_t>(l)).latent.data(), z.latent_per_position * static_cast<size_t>(length));
    }
  }
  return out;
}

void decode_session_state(const K3Config& c, const uint8_t* data, uint64_t size, int64_t length, K3Session& session) {
  if (session.length() != 0) fail("session state: restore needs a fresh session");
  const uint64_t want = session_state_bytes(c, length);
  if (size != want) fail("session state: ", size, " bytes, but ", length, " positions of this model are ", want);
  size_t at = 0;
  auto take = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    std::memcpy(v.data(), data + at, n * 4);
    at += n * 4;
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
