// Internal: the kernel table of the active path.
#pragma once

#include "kernels/isa.h"
#include "kernels/kernel_table.h"

namespace deltafin::kernels_detail {

// The table for active_isa(), looked up on every call (an atomic load), so
// set_active_isa takes effect at once.
const KernelTable& kernel_table();

// The table for a given path (it must be supported by the CPU).
const KernelTable& kernel_table(Isa isa);

}  // namespace deltafin::kernels_detail
