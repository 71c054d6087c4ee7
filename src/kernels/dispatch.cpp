#include "kernels/dispatch.h"

#include "kernels/isa.h"

namespace deltafin::kernels_detail {

const KernelTable& kernel_table(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return kAvx512Kernels;
    case Isa::Avx2: return kAvx2Kernels;
    case Isa::Scalar: break;
  }
  return kScalarKernels;
}

const KernelTable& kernel_table() { return kernel_table(active_isa()); }

}  // namespace deltafin::kernels_detail
