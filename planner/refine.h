// Phase 3 of the planner: a local search by simulation around the best simulated plans.
// The analytic estimate ranks plans well on average but can misjudge how much of a stage's
// gradient all-reduce the drain of the stages before it hides, or where a cut's transfer
// overlaps; a plan one layer or one GPU away from a good simulated plan is often better.
// Each round simulates the unseen neighbours of the best few plans; it stops when a round
// finds nothing faster (or the budget runs out).
#pragma once

#include <vector>

#include "planner/cost_model.h"

namespace pipesim::planner {

// The plans one step from `p`: each cut between consecutive stages moved by one layer
// (every stage keeps a layer), and, for a one-chunk pipeline, one replica moved from a stage
// to the stage before or after it (every stage keeps one; none gets more replicas than the
// micro-batch has samples). Everything else (schedule, data copies, tensor degree, memory
// settings, placement policy) stays as it is; 1F1B's warm-up (the schedule's or auto) may
// flip, and a synchronous plan may take any other ZeRO stage. A one-chunk pipeline
// may also merge two neighbouring stages, on the larger one's replicas or on both. (The
// planner tries each neighbour under every placement policy.) Interleaved and zb-v plans move a replica
// between neighbouring positions (every chunk of both), since the chunks of one device
// keep the same replicas. Last, the same GPUs with
// half the data copies and twice the replicas per stage, or the other way round (when the
// global batch still divides into whole micro-batches per copy).
std::vector<PlanPoint> neighbours(const PlanPoint& p, int64_t global_batch);

}  // namespace pipesim::planner
