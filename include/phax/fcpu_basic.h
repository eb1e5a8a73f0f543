// fast/cpu basic ops (float32): an umbrella over the headers of the nine op families that
// are not attention, ssm or mlstm, one per ref/ stem (fast/cpu/<stem>.c implements
// phax/fcpu_<stem>.h). See phax/fcpu.h for conventions.
//
// Every op of phax/ref.h except attention, ssm and mlstm, in float32: the same
// arguments in the same order as the ref_ function (float for double), forward
// overwrites, backward ADDS, a NULL gradient is skipped. Extra arguments, always
// last: `void *ws` (scratch the caller allocates once, size from the _ws
// function) and, for RoPE, an optional precomputed cos/sin table.
//
// Sums over rows or elements (column sums, dot products, losses, the global
// gradient norm, the norms' dg/db) are accumulated in double; the norms' row
// statistics in float lanes over blocks of 256 whose sums are added in double
// (error ~20·2^-24 of Σ|terms| for any width), LayerNorm's about a float shift so
// a common offset does not cancel; the elementwise math is float.
// Reductions over rows (dg, db, dW of embedding, losses) use a fixed partition,
// so the results are bit-identical from run to run; those of the norms and
// embedding do not even depend on the thread count.
#ifndef PHAX_FCPU_BASIC_H
#define PHAX_FCPU_BASIC_H

#include "phax/fcpu_embedding.h"
#include "phax/fcpu_linear.h"
#include "phax/fcpu_norm.h"
#include "phax/fcpu_activation.h"
#include "phax/fcpu_ffn.h"
#include "phax/fcpu_rope.h"
#include "phax/fcpu_mix.h"
#include "phax/fcpu_loss.h"
#include "phax/fcpu_adamw.h"

#endif
