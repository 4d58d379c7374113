// strategy.zero: DeepSpeed's ZeRO stages (Rajbhandari et al. 2020, arXiv 1910.02054).
//
// With N_d data-parallel ranks holding copies of the same parameters, stage 1 keeps 1/N_d
// of the optimizer state on each rank (P_os), stage 2 also 1/N_d of the gradients (P_os+g),
// stage 3 also 1/N_d of the weights (P_os+g+p). With Psi parameters and K bytes of optimizer
// state per parameter (12 for mixed-precision Adam: fp32 master weights, momentum,
// variance), a rank keeps (the paper's Fig. 1):
//   stage 0  (2 + 2 + K) Psi
//   stage 1  2 Psi + 2 Psi + K Psi / N_d
//   stage 2  2 Psi + (2 + K) Psi / N_d
//   stage 3  (2 + 2 + K) Psi / N_d
// Communication (schedules/lower.h): stages 1 and 2 reduce-scatter the gradients instead of
// all-reducing them, each rank updates its shard, then all-gather the updated weights;
// stage 3 reduce-scatters the gradients and all-gathers each layer's weights before the
// layer's part of every forward, recompute and backward (1.5 x the all-reduce's volume per
// pass).
#pragma once

#include <cstdint>

#include "schedules/model.h"

namespace pipesim {

struct ZeroBytes {
  int64_t weights = 0, gradients = 0, optimizer = 0;
};

// Resident bytes of one rank holding `params` parameters' worth of state (its tensor shard)
// among `ranks` data-parallel ranks under ZeRO `stage`; each sharded part rounded up.
ZeroBytes zero_resident_bytes(int64_t params, const ParamBytes& pb, int stage, int ranks);

}  // namespace pipesim
