#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "support/test_support.h"
#include "util/error.h"

using namespace deltafin;

namespace {

std::string error_of(const char* value) {
  try {
    resolve_isa(value);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Isa, NamesAreTheSettingValues) {
  EXPECT_STREQ(isa_name(Isa::Scalar), "scalar");
  EXPECT_STREQ(isa_name(Isa::Avx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::Avx512), "avx512");
  EXPECT_STREQ(isa_name(Isa::Neon), "neon");
}

TEST(Isa, UnsetOrEmptyMeansDetect) {
  EXPECT_EQ(resolve_isa(nullptr), detect_isa());
  EXPECT_EQ(resolve_isa(""), detect_isa());
  EXPECT_TRUE(isa_supported(detect_isa()));
  EXPECT_TRUE(isa_supported(Isa::Scalar));
  // AVX-512 here implies the AVX2 set: a CPU that has the first has the second.
  if (isa_supported(Isa::Avx512)) {
    EXPECT_TRUE(isa_supported(Isa::Avx2));
  }
}

TEST(Isa, ExplicitValuesSelectThatPath) {
  EXPECT_EQ(resolve_isa("scalar"), Isa::Scalar);
  if (isa_supported(Isa::Avx2)) {
    EXPECT_EQ(resolve_isa("avx2"), Isa::Avx2);
  }
  if (isa_supported(Isa::Avx512)) {
    EXPECT_EQ(resolve_isa("avx512"), Isa::Avx512);
  }
  if (isa_supported(Isa::Neon)) {
    EXPECT_EQ(resolve_isa("neon"), Isa::Neon);
  }
}

// A build offers its own target's paths and no other: NEON (baseline AArch64)
// on AArch64, the x86 paths (after CPUID) on x86-64, and detection picks the
// target's path.
TEST(Isa, TheTargetsOwnPathsOnly) {
#if defined(__aarch64__)
  EXPECT_TRUE(isa_supported(Isa::Neon));
  EXPECT_FALSE(isa_supported(Isa::Avx2));
  EXPECT_FALSE(isa_supported(Isa::Avx512));
  EXPECT_EQ(detect_isa(), Isa::Neon);
#else
  EXPECT_FALSE(isa_supported(Isa::Neon));
#endif
}

TEST(Isa, UnknownValueIsAnErrorNamingTheVariable) {
  for (const char* bad : {"bogus", "AVX2", "avx-512", "sse", " scalar"}) {
    std::string msg = error_of(bad);
    EXPECT_NE(msg.find("DELTAFIN_ISA"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  }
}

TEST(Isa, UnsupportedValueIsAnErrorNamingTheVariable) {
  for (Isa isa : kAllIsas) {
    if (isa_supported(isa)) continue;
    std::string msg = error_of(isa_name(isa));
    EXPECT_NE(msg.find("DELTAFIN_ISA"), std::string::npos) << msg;
    EXPECT_THROW(set_active_isa(isa), Error);
  }
}

TEST(Isa, SetActiveIsaSwitchesAndRestores) {
  Isa before = active_isa();
  set_active_isa(Isa::Scalar);
  EXPECT_EQ(active_isa(), Isa::Scalar);
  set_active_isa(before);
  EXPECT_EQ(active_isa(), before);
}

// Child half of EnvironmentVariableIsHonoured: reports what active_isa() made
// of the environment it was started with. Skipped in a normal run.
TEST(IsaEnvChild, Report) {
  if (std::getenv("DELTAFIN_ISA_TEST_CHILD") == nullptr) GTEST_SKIP() << "only run as a child process";
  try {
    std::cout << "active=" << isa_name(active_isa()) << "\n";
  } catch (const Error& e) {
    std::cout << "error=" << e.what() << "\n";
  }
}

TEST(Isa, EnvironmentVariableIsHonoured) {
  auto child = [](const std::string& value) {
    std::string out;
    test::run_command("DELTAFIN_ISA_TEST_CHILD=1 DELTAFIN_ISA='" + value +
                          "' /proc/" + std::to_string(::getpid()) + "/exe --gtest_filter=IsaEnvChild.Report",
                      &out);
    return out;
  };
  EXPECT_NE(child("scalar").find("active=scalar"), std::string::npos);
  std::string bad = child("turbo");
  EXPECT_NE(bad.find("error=DELTAFIN_ISA"), std::string::npos) << bad;
  EXPECT_NE(bad.find("turbo"), std::string::npos) << bad;
  EXPECT_NE(child("").find(std::string("active=") + isa_name(detect_isa())), std::string::npos);
}
