#include "kernels/dispatch.h"

#include "kernels/isa.h"

namespace deltafin::kernels_detail {

// Only the tables this target compiled are named (DELTAFIN_KERNELS_X86 and
// DELTAFIN_KERNELS_NEON come from CMakeLists.txt); isa_supported() never
// admits the others, so they fall through to scalar only in theory.
const KernelTable& kernel_table(Isa isa) {
  switch (isa) {
#if DELTAFIN_KERNELS_X86
    case Isa::Avx512: return kAvx512Kernels;
    case Isa::Avx2: return kAvx2Kernels;
#endif
#if DELTAFIN_KERNELS_NEON
    case Isa::Neon: return kNeonKernels;
#endif
    default: break;
  }
  return kScalarKernels;
}

const KernelTable& kernel_table() { return kernel_table(active_isa()); }

}  // namespace deltafin::kernels_detail
