#include "model/common/kv_session.h"

#include <algorithm>
#include <typeinfo>

#include "util/error.h"

namespace deltafin {

KvSession::KvSession(int64_t layers, int64_t kv_dim, int64_t capacity, int parts)
    : kv_dim_(kv_dim), capacity_(capacity), keys_(static_cast<size_t>(layers)),
      values_(parts == 2 ? static_cast<size_t>(layers) : 0) {
  if (capacity <= 0) fail("KV session: capacity ", capacity, " is not positive");
  if (parts != 1 && parts != 2) fail("KV session: ", parts, " parts per position (1: a latent cache, 2: keys and values)");
}

void KvSession::truncate(int64_t length) {
  if (length < 0 || length > length_)
    fail("KV session: cannot truncate to length ", length, "; it holds ", length_, " positions");
  length_ = length;
  // Shrinking keeps the allocation, so a rollback followed by new drafts does
  // not reallocate.
  for (auto& k : keys_) k.resize(static_cast<size_t>(length_ * kv_dim_));
  for (auto& v : values_) v.resize(static_cast<size_t>(length_ * kv_dim_));
}

void KvSession::reserve(int64_t n) {
  if (n < 0 || length_ + n > capacity_)
    fail("KV session: ", length_, " cached + ", n, " new positions exceed the capacity of ", capacity_,
         " (max_position_embeddings or the session's limit)");
  for (auto& k : keys_) k.resize(static_cast<size_t>((length_ + n) * kv_dim_));
  for (auto& v : values_) v.resize(static_cast<size_t>((length_ + n) * kv_dim_));
}

void KvSession::plan_length(int64_t positions) {
  const size_t floats = static_cast<size_t>(std::clamp<int64_t>(positions, 0, capacity_) * kv_dim_);
  for (auto& k : keys_) k.reserve(floats);
  for (auto& v : values_) v.reserve(floats);
}

void KvSession::commit(int64_t n) {
  if (n < 0 || static_cast<size_t>((length_ + n) * kv_dim_) > (keys_.empty() ? 0 : keys_[0].size()))
    fail("KV session: commit of ", n, " positions that were not reserved");
  length_ += n;
}

KvSession& KvCacheModel::kv_session(ModelSession& session) const {
  return const_cast<KvSession&>(kv_session(static_cast<const ModelSession&>(session)));
}

const KvSession& KvCacheModel::kv_session(const ModelSession& session) const {
  const KvSession& s = session_as<KvSession>(session, family_.c_str());
  if (s.layers() != layers_ || s.kv_dim() != kv_dim_ || s.parts() != parts_)
    fail(family_, ": the session was made for another model shape (", s.layers(), " layers, kv_dim ", s.kv_dim(), ")");
  return s;
}

// Marks of these families are plain lengths; another family's carries state
// this one cannot restore. Also refuses a mark past the session's length.
void KvCacheModel::check_mark(const SessionMark& mark, const KvSession& s) const {
  if (typeid(mark) != typeid(SessionMark)) fail(family_, " model: the mark belongs to another model family");
  if (mark.length > s.length()) fail(family_, " session: the mark is at ", mark.length, ", past the session's ", s.length());
}

std::shared_ptr<SessionMark> KvCacheModel::mark(const ModelSession& session) const {
  auto m = std::make_shared<SessionMark>();
  m->length = kv_session(session).length();
  return m;
}

void KvCacheModel::rewind(ModelSession& session, const SessionMark& mark) const {
  KvSession& s = kv_session(session);
  check_mark(mark, s);
  s.truncate(mark.length);
}

std::unique_ptr<ModelSession> KvCacheModel::copy_at(const ModelSession& session, const SessionMark& at) const {
  const KvSession& s = kv_session(session);
  check_mark(at, s);
  // Only the marked rows: a copy of the whole cache, truncated, would keep
  // the longer allocation while bytes() counts only the rows held.
  std::unique_ptr<KvSession> copy = make_session(s.capacity());
  copy->reserve(at.length);
  const size_t n = static_cast<size_t>(at.length * s.kv_dim());
  for (int64_t l = 0; l < s.layers() && n > 0; ++l) {
    std::copy_n(s.keys(l, 0), n, copy->keys(l, 0));
    if (parts_ == 2) std::copy_n(s.values(l, 0), n, copy->values(l, 0));
  }
  copy->commit(at.length);
  return copy;
}

uint64_t KvCacheModel::state_values(int64_t length) const {
  return static_cast<uint64_t>(layers_) * static_cast<uint64_t>(parts_) * static_cast<uint64_t>(kv_dim_) *
         static_cast<uint64_t>(std::max<int64_t>(length, 0));
}

void KvCacheModel::for_each_state_part(const ModelSession& session, const SessionMark& at,
                                       const StatePartFn& part) const {
  const KvSession& s = kv_session(session);
  check_mark(at, s);
  const size_t n = static_cast<size_t>(at.length * s.kv_dim());
  for (int64_t l = 0; l < s.layers(); ++l) {
    part(s.keys(l, 0), n);
    if (parts_ == 2) part(s.values(l, 0), n);
  }
}

void KvCacheModel::read_state(ModelSession& fresh, int64_t length, const StateReadFn& read) const {
  KvSession& s = kv_session(fresh);
  if (s.length() != 0) fail(family_, " session state: restore needs a fresh session");
  s.reserve(length);  // refuses a length past the session's capacity
  const size_t n = static_cast<size_t>(length * s.kv_dim());
  for (int64_t l = 0; l < s.layers(); ++l) {
    read(s.keys(l, 0), n);
    if (parts_ == 2) read(s.values(l, 0), n);
  }
  s.commit(length);
}

Rows KvCacheModel::forward_verify(ModelSession& session, std::span<const uint32_t> tokens) {
  KvSession& s = kv_session(session);
  s.verification() = {s.length(), 0};
  Rows logits = forward(session, tokens, true);  // a pass that throws commits nothing, and leaves nothing to keep
  s.verification().rows = tokens.size();
  return logits;
}

void KvCacheModel::keep_verified(ModelSession& session, size_t rows) {
  KvSession& s = kv_session(session);
  KvSession::Verification& v = s.verification();
  if (rows == 0 || rows > v.rows) fail("verifier: cannot commit ", rows, " rows of a ", v.rows, "-row pass");
  s.truncate(v.start + static_cast<int64_t>(rows));
  v = {};
}

}  // namespace deltafin
