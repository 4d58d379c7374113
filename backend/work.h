// The real work behind each op of a scenario's TaskGraph, for the backends.
#pragma once

#include <vector>

#include "backend/executor.h"
#include "scenario/scenario.h"

namespace pipesim {

// Compute ops: the op's time at its stage's FLOP rate, which is the stage's forward FLOPs
// over its forward time when the model knows its FLOPs (generated models), otherwise the
// GPU's peak x efficiency in the training precision. So a backward of twice the forward time
// does twice the forward's FLOPs, a recompute as many, and a split backward's halves their
// share. Optimizer ops: the stage's parameters x bytes of traffic per parameter (read the
// gradient, read and write weights and optimizer state), divided among tensor ranks.
// Transfers: their bytes.
std::vector<ExecWork> op_work(const Scenario& s, const TaskGraph& g);

// The FLOP rate op_work assumes for `stage` (FLOPs per second of op time).
double stage_flop_rate(const Scenario& s, int stage);

}  // namespace pipesim
