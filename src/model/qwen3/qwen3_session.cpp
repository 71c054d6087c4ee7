#include "model/qwen3/qwen3_session.h"

#include <algorithm>

#include "util/error.h"

namespace deltafin {

Qwen3Session::Qwen3Session(const Qwen3Config& config, int64_t capacity)
    : kv_dim_(config.kv_dim()),
      capacity_(capacity > 0 ? capacity : config.max_position_embeddings),
      bytes_per_position_(bytes_per_position(config)),
      keys_(config.num_hidden_layers),
      values_(config.num_hidden_layers) {
  if (capacity < 0) fail("Qwen3 session: capacity ", capacity, " is negative");
}

void Qwen3Session::truncate(int64_t length) {
  if (length < 0 || length > length_)
    fail("Qwen3 session: cannot truncate to length ", length, "; it holds ", length_, " positions");
  length_ = length;
  // Shrinking keeps the allocation, so a rollback followed by new drafts does
  // not reallocate.
  for (auto& k : keys_) k.resize(static_cast<size_t>(length_ * kv_dim_));
  for (auto& v : values_) v.resize(static_cast<size_t>(length_ * kv_dim_));
}

void Qwen3Session::reserve(int64_t n) {
  if (n < 0 || length_ + n > capacity_)
    fail("Qwen3 session: ", length_, " cached + ", n, " new positions exceed the capacity of ", capacity_,
         " (max_position_embeddings or the session's limit)");
  for (auto& k : keys_) k.resize(static_cast<size_t>((length_ + n) * kv_dim_));
  for (auto& v : values_) v.resize(static_cast<size_t>((length_ + n) * kv_dim_));
}

void Qwen3Session::plan_length(int64_t positions) {
  const size_t floats = static_cast<size_t>(std::clamp<int64_t>(positions, 0, capacity_) * kv_dim_);
  for (auto& k : keys_) k.reserve(floats);
  for (auto& v : values_) v.reserve(floats);
}

void Qwen3Session::commit(int64_t n) {
  if (n < 0 || static_cast<size_t>((length_ + n) * kv_dim_) > (keys_.empty() ? 0 : keys_[0].size()))
    fail("Qwen3 session: commit of ", n, " positions that were not reserved");
  length_ += n;
}

}  // namespace deltafin
