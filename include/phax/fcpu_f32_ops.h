// The fast/cpu op table (phax/f32_ops.h): fast/cpu's kernels, its elementwise ops and its
// arena, the table the fast model runner (fmodel_*) calls through.
#ifndef PHAX_FCPU_F32_OPS_H
#define PHAX_FCPU_F32_OPS_H

#include "phax/f32_ops.h"

// The one cpu table (static storage; every entry set).
const phax_f32_ops *fcpu_f32_ops(void);

#endif
