// The modules of a generated transformer layer that selective recompute can re-run
// (schedules/model.h, RecomputePart): which ops each re-runs and which activation bytes it
// stops keeping, from costs/models.cc's accounting. Internal to costs/.
#pragma once

#include <vector>

#include "costs/internal/layer_ops.h"
#include "costs/models.h"
#include "schedules/model.h"

namespace pipesim::internal {

// Layer `x` (block_layer's, its ops priced) of shape `t` for b sequences; `element`: the
// training precision's bytes per element; `q`: the weight GEMMs' low precision (fp8, NVFP4
// or none), whose copies of their inputs the layer keeps.
std::vector<RecomputePart> recompute_parts(const TransformerShape& t, bool moe, const Layer& x,
                                           double b, int64_t element, const Quant& q);

}  // namespace pipesim::internal
