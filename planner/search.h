// The planner's analytic phase: which strategies are worth simulating.
//
// For each schedule, data-parallel degree and micro-batch size, a dynamic program over
// (stages placed, layers placed, GPUs used, replicas of the last stage) builds pipelines
// stage by stage: each step picks the next stage's last layer and its replica count
// (uneven, any count the micro-batch allows), placed on the next GPUs in device order.
// Each state keeps a Pareto set of labels (slowest stage or cut, fill/drain sum, exposed
// all-reduce), the terms of CostModel's iteration time, so no plan that could win under
// the estimate is dropped. Stages that do not fit in memory are never extended. Large
// clusters (more than kUnevenLimit GPUs per copy), interleaved and zb-v schedules and the
// memory levels above the first (ZeRO, sequence parallelism) use uniform replicas with a
// compute-balanced cut instead. Small spaces (kSmallDpWork) search more: placement-aware
// plans and uneven interleaved / zb-v replicas.
#pragma once

#include <limits>
#include <vector>

#include "planner/cost_model.h"
#include "planner/shortlist.h"
#include "planner/uniform_grid.h"

namespace pipesim::planner {

inline constexpr int kUnevenLimit = 64;
// Above this much DP work (moves), the uniform search stands in for the DP.
inline constexpr double kDpBudget = 1e6;
// Small spaces (DP work up to this much): on several nodes the DP runs a second time with
// placement-blind cuts and its plans are costed under every placement policy, and
// interleaved and zb-v plans get uneven replicas per position too.
inline constexpr double kSmallDpWork = 2.5e5;

struct SearchStats {
  int64_t costed = 0;  // strategies (partial ones included) costed by the DP and the grid
  // The best estimate of a plan that fits, so far: the DP drops partial pipelines whose
  // estimate is already past kBoundFactor times it.
  double incumbent = std::numeric_limits<double>::infinity();
  // Whether a search met a stage or plan that does not fit and, by a lower bound on its
  // time, could beat the incumbent (reset by the caller): only then can a lower-memory
  // level (memory_levels) find anything worth keeping.
  bool memory_bound = false;
  // Of `costed`, the grid plans a lower bound on their time showed could not be kept.
  int64_t bounded = 0;
};
inline constexpr double kBoundFactor = 2.0;

// Micro-batch sizes worth trying: every divisor of the global batch when the model's costs
// follow from the micro-batch (generated and shape-described layers; up to 16 samples
// beyond 64 GPUs), else the scenario's.
std::vector<int64_t> micro_batch_sizes(const Scenario& s);
// Tensor-parallel degrees worth trying: powers of two up to a server's GPUs when every
// layer can be split (generated transformers), else 1 alone.
std::vector<int> tensor_degrees(const Scenario& s);

// The schedules searched for a scenario: asynchronous scenarios keep to PipeDream and
// 2BW; synchronous ones get 1F1B with both warm-ups, GPipe, interleaved and zero bubble
// (when the backward is split), each without recompute, with full recompute and, when the
// model has attention cores, selective.
struct ScheduleChoice {
  ScheduleKind kind;
  Warmup warmup = Warmup::kSchedule;
  Recompute recompute = Recompute::kNone;
  int zero = 0;                    // ZeRO stage (synchronous schedules)
  bool zero_fixed = false;         // the user fixed it (--fix strategy.zero): kept as given
  bool sequence_parallel = false;  // with tensor > 1
  int context = 1, expert = 1;     // (one replica per stage when either is above 1)
  int expert_tensor = 1;           // the scenario's Strategy::expert_tensor, kept
};
std::vector<ScheduleChoice> schedule_choices(const Scenario& s);

// Ways to lower memory, in the order the analytic phase tries them, each only when the one
// before met a stage that did not fit: without, then with sequence parallelism (tensor >
// 1), under ZeRO 0, 1, 2 and 3 (synchronous schedules, more than one GPU). ZeRO 1 (Megatron's
// distributed optimizer) reduce-scatters once an iteration and shards the optimizer step:
// stage 0's volume with less memory. ZeRO 2 also shards the gradients, and so reduce-scatters
// every micro-batch (half an all-reduce each); 3 also pays the weight gathers of every pass.
struct MemoryLevel {
  int zero = 0;
  bool sequence_parallel = false;
};
std::vector<MemoryLevel> memory_levels(const Scenario& s, int tensor);
// Context degrees worth trying (1, and 2-8 for sequences of 8192 tokens and more that split
// into 2 x CP chunks) and expert degrees (1, and for a model with E experts the largest
// divisors of E that fit a server's GPUs and 64 GPUs).
std::vector<int> context_degrees(const Scenario& s);
std::vector<int> expert_degrees(const Scenario& s);

// The best plans under the estimate for one schedule, micro-batch and data degree, using at
// most `max_gpus` GPUs per pipeline copy (for every pipeline depth, the few best), offered
// to `out` in order. `grid`: the uniform grid of `cm`, `data` and `micro_batches`, shared by
// every schedule choice.
void search(const CostModel& cm, const ScheduleChoice& sc, int data, int64_t micro_batch,
            int64_t micro_batches, int max_gpus, SearchStats& stats, UniformGrid& grid,
            Shortlist& out);

}  // namespace pipesim::planner
