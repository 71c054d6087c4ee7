// Which SIMD path the kernels take. Every path computes the same canonical
// reduction order (k3-model.md §4.4), so they agree bit for bit; the choice
// only changes speed, and an ARM64 run gives the same bits as an x86-64 one.
// On x86-64 the binary runs on any CPU: the AVX2 and AVX-512 code lives in
// separately compiled files that are only entered after the run-time check
// below. On AArch64 Advanced SIMD (NEON) is part of the base architecture, so
// the NEON path needs no check. Scalar exists on every target.
#pragma once

namespace deltafin {

enum class Isa { Scalar, Avx2, Avx512, Neon };

// Every path this source knows, scalar first: tests and benchmarks iterate it
// and keep those isa_supported() allows, so a new path is covered at once.
inline constexpr Isa kAllIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon};

// The best path this CPU and OS allow: Avx512 needs AVX-512 F+BW+VL (plus the
// AVX2 set) with ZMM/opmask state enabled in XCR0; Avx2 needs AVX2+FMA+F16C with
// YMM state enabled. On AArch64 it is Neon. The x86 paths exist only in x86-64
// builds and Neon only in AArch64 builds; on other targets only Scalar.
Isa detect_isa();

// Whether this build has `isa` and the CPU/OS can run it (Scalar always).
bool isa_supported(Isa isa);

// The path in use: DELTAFIN_ISA=scalar|avx2|avx512|neon forces one, otherwise
// detect_isa(). Resolved once and cached; an unknown or unsupported value is a
// deltafin::Error naming DELTAFIN_ISA.
Isa active_isa();

// Overrides the active path (tests, benchmarks); throws Error if the CPU lacks it.
void set_active_isa(Isa isa);

// The rule active_isa() applies to the variable's value (nullptr or "" = not
// set): exposed so the parsing can be tested without touching the environment.
Isa resolve_isa(const char* deltafin_isa_value);

const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512", "neon"

}  // namespace deltafin
