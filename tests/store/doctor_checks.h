// What the doctor tests check a report with.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "store/doctor.h"

namespace deltafin::test {

// Every problem, one per line (for failure messages).
inline std::string all(const DoctorReport& r) {
  std::string s;
  for (const std::string& p : r.problems) s += p + "\n";
  return s;
}

// Exactly one problem, containing every needle.
inline void expect_one_problem(const DoctorReport& r, std::initializer_list<std::string> needles) {
  ASSERT_EQ(r.problems.size(), 1u) << all(r);
  for (const std::string& n : needles)
    EXPECT_NE(r.problems[0].find(n), std::string::npos) << "lacks \"" << n << "\": " << r.problems[0];
}

}  // namespace deltafin::test
