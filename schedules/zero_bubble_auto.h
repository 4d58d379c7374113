// Zero Bubble's automatic schedules (Qi et al. 2024, arXiv 2401.10241, section 3): ZB-1p
// and ZB-2p, the greedy heuristic of sail-sg/zero-bubble-pipeline-parallelism
// (`auto_schedule.py`, `Graph.manual_order` and `initial_solution`).
//
// The heuristic replays the pipeline with the profile's times: micro-batch i's backward
// runs on every stage in iteration i; forwards go in as early as the activation-memory limit
// and the expected gradient arrival allow; pending weight-gradient steps (W) fill the gaps
// where a stage would otherwise wait for a transfer, and run whenever the memory limit
// needs room. Eight variants (three on/off rules) are tried and the shortest wins.
#pragma once

#include <vector>

#include "schedules/order.h"
#include "schedules/stage_costs.h"

namespace pipesim {

// Per-stage orders of F, B and W for `micro_batches` micro-batches under `memory_factor` x S
// micro-batches of each stage's activations (M_B), counted as the reference does: F
// allocates M_B, B frees all but `weight_activation`, W frees that. 1 gives ZB-1p (p M_B),
// 2 gives ZB-2p (2p M_B).
ScheduleOrder zero_bubble_auto_order(const StageCosts& costs, int micro_batches, int memory_factor);

}  // namespace pipesim
