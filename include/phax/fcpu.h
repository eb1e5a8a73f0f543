// phax fast/cpu: float32 kernels on OpenBLAS + OpenMP, the same functions as
// ref/ (see phax/ref.h and docs/spec.md) and proven equal to them by the
// equivalence tests (tests/test_fast_*.c, test_fcpu_*.c).
//
// Conventions (every fcpu_ function):
//   * Names fcpu_<op>_fwd/_bwd (the ref_ stem with fcpu_); arguments in the order and layout of
//     the matching ref_ function, with float instead of double.
//   * Forward overwrites outputs; backward ADDS into gradients; NULL = skip.
//   * No allocation inside a call on the hot path. A kernel that needs scratch
//     exports `size_t fcpu_<op>_<fwd|bwd>_ws(...)` (bytes; may be 0) and takes
//     `void *ws` as its last argument: the caller allocates once and reuses it.
//   * Parallel over the independent dimension with OpenMP; deterministic: the
//     same inputs give bit-identical outputs for a given thread count.
//   * Returns PHAX_OK / PHAX_ERR (message in phax_error()) where ref does.
#ifndef PHAX_FCPU_H
#define PHAX_FCPU_H

#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"
#include "phax/ops.h"  // the op contract: attribute structs (phax_attn_cfg, phax_adamw_cfg), constants

// The op families, one header each, as ref/ is split (fast/cpu/<stem>.c implements
// phax/fcpu_<stem>.h). The family headers include only phax/ops.h, never this file.
//
// The small ops (embedding, linear, norm, activation, ffn, rope, mix, loss, adamw): every op of
// phax/ref.h but attention, ssm, mlstm and gdn. Extra arguments, always last: `void *ws` and,
// for RoPE, an optional precomputed cos/sin table. Sums over rows or elements (column sums, dot
// products, losses, the global gradient norm, the norms' dg/db) are accumulated in double; the
// norms' row statistics in float lanes over blocks of 256 whose sums are added in double (error
// ~20·2^-24 of Σ|terms| for any width), LayerNorm's about a float shift so a common offset does
// not cancel; the elementwise math is float. Reductions over rows (dg, db, dW of embedding,
// losses) use a fixed partition, so the results are bit-identical from run to run; those of the
// norms and embedding do not even depend on the thread count.
#include "phax/fcpu_embedding.h"
#include "phax/fcpu_linear.h"
#include "phax/fcpu_norm.h"
#include "phax/fcpu_activation.h"
#include "phax/fcpu_ffn.h"
#include "phax/fcpu_rope.h"
#include "phax/fcpu_mix.h"
#include "phax/fcpu_loss.h"
#include "phax/fcpu_adamw.h"
#include "phax/fcpu_attention.h"
#include "phax/fcpu_ssm.h"
#include "phax/fcpu_gdn.h"
#include "phax/fcpu_mlstm.h"

#endif
