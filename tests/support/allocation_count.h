// Counting heap allocations in a test (the decode-path tests of the
// families): such a test binary replaces the global operator new with one
// that counts while a count is open (tests/support/allocation_count.cpp,
// linked into the binaries that use it: tests/CMakeLists.txt).
// Not under AddressSanitizer, whose own operator new checks every new
// against its delete: there counts_allocations() is false and nothing is
// replaced.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>

#include "model/common/causal_model.h"

namespace deltafin::test {

bool counts_allocations();
void begin_allocation_count();
uint64_t end_allocation_count();  // operator new calls since begin

// operator new calls of the sixth one-token step of `model` on a fresh
// session planned for 16 positions, as the engine plans it. Five warm-up
// steps first: the attention scratch grows geometrically with the context
// (to 8 positions at the fifth), so the sixth needs no more.
inline uint64_t decode_step_allocations(CausalModel& model) {
  std::unique_ptr<ModelSession> session = model.new_session();
  session->plan_length(16);
  const uint32_t tokens[] = {3, 5, 7, 11, 13, 17};
  for (size_t t = 0; t < 5; ++t) model.forward(*session, std::span(tokens + t, 1), false);
  begin_allocation_count();
  Rows logits = model.forward(*session, std::span(tokens + 5, 1), false);
  const uint64_t count = end_allocation_count();
  EXPECT_EQ(logits.T, 1u);
  return count;
}

}  // namespace deltafin::test
