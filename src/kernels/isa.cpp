#include "kernels/isa.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

// CMakeLists.txt defines DELTAFIN_KERNELS_X86 when the AVX2/AVX-512 files are
// built (x86-64 targets) and DELTAFIN_KERNELS_NEON when the NEON files are
// (AArch64 targets): a path is offered only where its code was compiled.
#if DELTAFIN_KERNELS_X86
#include <cpuid.h>
#endif

#include "util/error.h"

namespace deltafin {

namespace {

struct CpuFeatures {
  bool avx2 = false;    // AVX + AVX2 + FMA + F16C, YMM state enabled by the OS
  bool avx512 = false;  // AVX-512 F + BW + VL, opmask/ZMM state enabled by the OS
};

#if DELTAFIN_KERNELS_X86
// XGETBV through inline assembly: the intrinsic would need -mxsave on this
// file, which must stay baseline x86-64.
uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures query_cpu() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  bool osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), fma = ecx & (1u << 12), f16c = ecx & (1u << 29);
  if (!osxsave || !avx) return f;
  uint64_t xcr0 = read_xcr0();
  bool ymm_state = (xcr0 & 0x6) == 0x6;     // SSE + AVX state
  bool zmm_state = (xcr0 & 0xe0) == 0xe0;   // opmask + ZMM_Hi256 + Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  bool avx2 = ebx & (1u << 5), avx512f = ebx & (1u << 16), avx512bw = ebx & (1u << 30),
       avx512vl = ebx & (1u << 31);
  f.avx2 = ymm_state && avx2 && fma && f16c;
  f.avx512 = f.avx2 && zmm_state && avx512f && avx512bw && avx512vl;
  return f;
}
#else
CpuFeatures query_cpu() { return {}; }
#endif

const CpuFeatures& cpu() {
  static const CpuFeatures features = query_cpu();
  return features;
}

// -1 = not resolved yet; otherwise an Isa value.
std::atomic<int> g_active{-1};

}  // namespace

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return cpu().avx2;
    case Isa::Avx512: return cpu().avx512;
    // Advanced SIMD is mandatory in AArch64 (and Linux enables it), so an
    // AArch64 build can always run it.
    case Isa::Neon: return DELTAFIN_KERNELS_NEON != 0;
  }
  return false;
}

Isa detect_isa() {
  if (isa_supported(Isa::Neon)) return Isa::Neon;
  if (cpu().avx512) return Isa::Avx512;
  if (cpu().avx2) return Isa::Avx2;
  return Isa::Scalar;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Neon: return "neon";
  }
  return "unknown";
}

Isa resolve_isa(const char* value) {
  if (value == nullptr || *value == '\0') return detect_isa();
  Isa isa;
  if (std::strcmp(value, "scalar") == 0) {
    isa = Isa::Scalar;
  } else if (std::strcmp(value, "avx2") == 0) {
    isa = Isa::Avx2;
  } else if (std::strcmp(value, "avx512") == 0) {
    isa = Isa::Avx512;
  } else if (std::strcmp(value, "neon") == 0) {
    isa = Isa::Neon;
  } else {
    fail("DELTAFIN_ISA: unknown value '", value, "' (expected scalar, avx2, avx512 or neon)");
  }
  if (!isa_supported(isa)) {
    fail("DELTAFIN_ISA=", value, ": this CPU does not support it (best available: ", isa_name(detect_isa()), ")");
  }
  return isa;
}

Isa active_isa() {
  int v = g_active.load(std::memory_order_relaxed);
  if (v >= 0) return static_cast<Isa>(v);
  Isa isa = resolve_isa(std::getenv("DELTAFIN_ISA"));
  int expected = -1;
  // A concurrent first call or set_active_isa may have won; keep theirs.
  g_active.compare_exchange_strong(expected, static_cast<int>(isa), std::memory_order_relaxed);
  return static_cast<Isa>(g_active.load(std::memory_order_relaxed));
}

void set_active_isa(Isa isa) {
  if (!isa_supported(isa)) fail("set_active_isa: this CPU does not support ", isa_name(isa));
  g_active.store(static_cast<int>(isa), std::memory_order_relaxed);
}

}  // namespace deltafin
