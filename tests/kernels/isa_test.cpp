#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

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

#if defined(__x86_64__) && defined(__linux__)
// The features the kernel lists for CPU 0 in /proc/cpuinfo ("flags"): a view
// of the CPU that does not go through isa.cpp's CPUID code. The kernel drops
// a feature whose register state the OS does not enable, as isa.cpp's XCR0
// check does.
std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

// Every x86 path this CPU can run is offered (and so run by every kernel
// test, which iterates the supported paths): a build or a detection that
// quietly lost AVX2 or AVX-512 would leave the kernel tests passing on scalar
// alone. A path whose features the CPU lacks is not offered, and its tests
// are skipped with a note (a CPU without AVX-512 is no fault of the machine).
TEST(Isa, EveryX86PathThisCpuHasIsOffered) {
  const std::set<std::string> flags = cpuinfo_flags();
  ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  auto has = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (!flags.count(n)) return false;
    return true;
  };
  const bool avx2 = has({"avx", "avx2", "fma", "f16c"});
  const bool avx512 = avx2 && has({"avx512f", "avx512bw", "avx512vl"});
  for (auto [isa, cpu_has, features] : {std::tuple{Isa::Avx2, avx2, "avx avx2 fma f16c"},
                                        std::tuple{Isa::Avx512, avx512, "avx512f avx512bw avx512vl"}}) {
    SCOPED_TRACE(isa_name(isa));
    if (!cpu_has) {
      EXPECT_FALSE(isa_supported(isa)) << "offered on a CPU without " << features;
      std::printf("[ note     ] this CPU lacks %s: the %s path is not tested here\n", features, isa_name(isa));
      continue;
    }
    test::have_capability(isa_name(isa), isa_supported(isa),
                          std::string("/proc/cpuinfo lists ") + features + ", but this build does not offer the path");
  }
}
#endif

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
