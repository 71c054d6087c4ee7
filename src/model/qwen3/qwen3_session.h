// A Qwen3 session: the shared KV session (model/common/kv_session.h) shaped
// by a Qwen3 config: every layer's fp32 grouped-query keys and values.
#pragma once

#include "model/common/kv_session.h"
#include "model/qwen3/qwen3_config.h"

namespace deltafin {

class Qwen3Session : public KvSession {
public:
  // capacity: the most positions this session may hold; 0 = the config's
  // max_position_embeddings (RoPE is only trained that far).
  explicit Qwen3Session(const Qwen3Config& config, int64_t capacity = 0);
  static uint64_t bytes_per_position(const Qwen3Config& config) {
    return KvSession::bytes_per_position(config.num_hidden_layers, config.kv_dim());
  }
};

}  // namespace deltafin
