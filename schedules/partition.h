// Even split of consecutive layers into stages by compute time (the `pipeline: N`
// shorthand): minimise the slowest stage's forward + backward time.
#pragma once

#include <vector>

#include "schedules/model.h"

namespace pipesim {

// Splits model.layers into `stages` consecutive non-empty groups whose largest
// forward + backward time is as small as possible; among those, the most even one (least
// sum of squared stage times; for very large models, the one that gives earlier stages as
// many layers as the bound allows). Requires layers >= stages.
std::vector<StageSpec> even_partition(const Model& model, int stages, int replicas = 1);
// The same on GPUs of different speeds: `cost[s][l]`, layer l's forward + backward time in
// picoseconds on the GPUs that run stage s (its slowest), so a slow stage takes fewer layers.
std::vector<StageSpec> even_partition(const std::vector<std::vector<int64_t>>& cost,
                                      int replicas = 1);

}  // namespace pipesim
