// Where a strategy's stages run: the type every layer shares (topology's placement
// policies make one, scenarios hold one, the lowering reads one).
#pragma once

#include <vector>

namespace pipesim {

// [copy][position]: the devices of each position's replicas x tensor ranks, replica-major
// (lane j * t + k is rank k of replica j).
using Placement = std::vector<std::vector<std::vector<int>>>;

}  // namespace pipesim
