// The modules of a generated transformer layer that selective recompute can re-run
// (schedules/model.h, RecomputePart): which ops each re-runs and which activation bytes it
// stops keeping, from costs/models.cc's accounting. Internal to costs/.
#pragma once

#include <vector>

#include "costs/models.h"
#include "schedules/model.h"

namespace pipesim::internal {

// Layer `x` (block_layer's, its ops priced) of shape `t` for b sequences; `element`: the
// training precision's bytes per element; `quantized`: the bytes per element of a weight
// GEMM's kept input under fp8 or NVFP4 (1 or 0.5625; 0: the GEMMs run in 16 bits).
std::vector<RecomputePart> recompute_parts(const TransformerShape& t, bool moe, const Layer& x,
                                           double b, int64_t element, double quantized);

}  // namespace pipesim::internal
