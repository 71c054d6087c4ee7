// Counting heap allocations in a test (the decode-path tests of the
// families): such a test binary replaces the global operator new with one
// that counts while a count is open (tests/support/allocation_count.cpp,
// linked into the binaries that use it: tests/CMakeLists.txt).
// Not under AddressSanitizer, whose own operator new checks every new
// against its delete: there counts_allocations() is false and nothing is
// replaced.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <span>

#include "model/common/causal_model.h"

namespace deltafin::test {

bool counts_allocations();
void begin_allocation_count();
uint64_t end_allocation_count();  // operator new calls since begin

// operator new calls of a one-token decode step of `model` in steady state:
// the fewest over steps 6 to 13 of a fresh session planned for 16
// positions, as the engine plans it. Five warm-up steps first: the attention
// scratch grows geometrically with the context (to 8 positions at the
// fifth; once more, to 16, at the ninth). The fewest, not one step's count,
// because with a thread pool the backend's buffer pool holds as many
// buffers as the threads ever held at once, and a step whose scheduling
// overlaps more than any before it grows the pool (seen under
// qemu-aarch64 in CI: 11 at one step). That growth is bounded, so it
// cannot repeat at every step; an allocation per layer would.
inline uint64_t decode_step_allocations(CausalModel& model) {
  std::unique_ptr<ModelSession> session = model.new_session();
  session->plan_length(16);
  const uint32_t tokens[] = {3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43};
  constexpr size_t warm_up = 5;
  for (size_t t = 0; t < warm_up; ++t) model.forward(*session, std::span(tokens + t, 1), false);
  uint64_t fewest = UINT64_MAX;
  for (size_t t = warm_up; t < std::size(tokens); ++t) {
    begin_allocation_count();
    Rows logits = model.forward(*session, std::span(tokens + t, 1), false);
    fewest = std::min(fewest, end_allocation_count());
    EXPECT_EQ(logits.T, 1u);
  }
  return fewest;
}

}  // namespace deltafin::test
