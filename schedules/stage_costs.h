// What the profile-driven schedules (zb-1p, zb-2p, zb-v) know about a pipeline before they
// order it: each global stage's per-micro-batch times on one of its GPUs, its activation
// bytes, and the idle-route time of each cross-stage transfer.
#pragma once

#include <cstdint>
#include <vector>

#include "core/time.h"

namespace pipesim {

struct StageCosts {
  std::vector<Time> forward, backward, weight;  // [global stage]: F, B (input gradient), W
  std::vector<int64_t> activation;              // [global stage]: bytes F allocates
  // [global stage]: of those, the bytes W still reads once B is done (the layer inputs of
  // the weight-gradient GEMMs); B frees the rest. Empty: W keeps everything.
  std::vector<int64_t> weight_activation;
  // [edge e between global stages e and e + 1]: the output reaching e + 1, and the
  // gradient coming back to e. Zero where both stages share a device.
  std::vector<Time> send, gradient;
};

}  // namespace pipesim
