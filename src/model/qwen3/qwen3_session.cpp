#include "model/qwen3/qwen3_session.h"

#include "util/error.h"

namespace deltafin {

namespace {
int64_t checked_capacity(const Qwen3Config& config, int64_t capacity) {
  if (capacity < 0) fail("Qwen3 session: capacity ", capacity, " is negative");
  return capacity > 0 ? capacity : config.max_position_embeddings;
}
}  // namespace

Qwen3Session::Qwen3Session(const Qwen3Config& config, int64_t capacity)
    : KvSession(config.num_hidden_layers, config.kv_dim(), checked_capacity(config, capacity)) {}

}  // namespace deltafin
