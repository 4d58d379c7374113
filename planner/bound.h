// Proven lower bounds on iteration time (SPEC section 6, `lower_bound_iteration_time_s`),
// from the per-layer costs the simulator replays (planner/cost_model.h). Neither counts a
// transfer, a collective or a wait, only compute each GPU must run, so no simulation of a
// plan they cover can come out faster:
//
//  - plan_bound(p): for every position q of the pipeline (its GPUs), the first micro-batch's
//    forward through the global stages before q's first one (q can start no earlier), then
//    q's compute for all M micro-batches (F, B, W and what recompute re-runs) and its
//    optimizer step; under a flushing schedule whose backward is one pass, q's last backward
//    is followed by that micro-batch's backward through the stages before q (the optimizer
//    of q overlaps that tail). Over I iterations the fill is paid once and each iteration
//    adds q's work: iteration >= (fill + I (compute + opt) - opt + max(opt, tail)) / I.
//  - work_bound: every GPU-second of compute an iteration needs at a micro-batch size and a
//    tensor, context and expert degree, spread evenly over all N GPUs, plus every
//    parameter's optimizer step once: (B / b) t c compute(b, t) / N + opt / N. No strategy
//    of that micro-batch and degrees, on N GPUs or fewer, is faster; the planner takes the
//    least over the degrees it searches.
//
// And a floor on memory: a GPU holds at least its stages' resident state (weights, gradients
// and optimizer state as ZeRO shards them) and, without recompute, each of its stages'
// activations of one micro-batch (the first micro-batch's, all alive when its first
// backward on the GPU starts). A plan whose floor passes the GPU's memory cannot fit.
//
// Asynchronous schedules (PipeDream, 2BW) get no time bound: their iteration time is the
// mean gap between mini-batch completions over a few iterations, which work begun before
// the first completion shortens.
//
// All assume what the cost model assumes of the layer costs: a GPU's share of a layer
// split over t tensor ranks, c context ranks or r replicas costs at least 1/(t c r) of it.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "planner/cost_model.h"
#include "schedules/order.h"

namespace pipesim::planner {

// A transfer between positions takes at least the least latency and the bytes at the most
// bandwidth of any route of the cluster (FastestRoute; contention only slows it), so the
// replay waits that long at every hop: on few micro-batches, where one micro-batch's way
// through every stage and back is the critical path, the hops are much of the time.
struct FastestRoute {
  double latency_s = 0;
  double bytes_per_s = std::numeric_limits<double>::infinity();
};
// Over every pair of GPUs (up to 64 GPUs; past that, no latency and no limit).
FastestRoute fastest_route(const Cluster& c);

// The least iteration time `p` can simulate to, with `micro_batches` per copy (seconds):
// the busiest position's compute with its fill and tail, and (flushing schedules) one
// micro-batch's way forward through every stage and back, each hop between GPUs at least
// `hop`'s time for the stage's output (iterations cannot overlap it: the next one's first
// forward waits for the first stage's optimizer step, after its last backward).
double plan_bound(const CostModel& cm, const PlanPoint& p, int64_t micro_batches,
                  FastestRoute hop = {});

// Tighter, where the schedule's order does not depend on the stage costs (GPipe, 1F1B with
// the schedule's or the deep warm-up, interleaved, ZB-H1/H2): the order itself replayed
// with compute alone. Each position runs its steps in their order; a forward waits for its
// micro-batch's forward on the stage before, a backward for its own forward and the
// backward of the stage after (with W, when W is folded into the backward's call), and
// nothing waits for a transfer. The simulator replays the same order with transfers,
// collectives and memory on top, so it can only end later. The order is built once per
// pipeline shape (schedule, positions, chunks, micro-batches, iterations) and replayed
// for each cut.

class OrderReplay {
 public:
  // Empty when the order depends on costs (zb-1p/2p/v, the auto warm-up, asynchronous).
  static std::optional<OrderReplay> of(const PlanPoint& p, int64_t micro_batches,
                                       int iterations, FastestRoute hop = {});
  // The replay's iteration time for `p` (the shape it was built for, any cut). With
  // `assigned` < the stage count, the later stages count as taking no time: a bound on
  // every way of cutting them (the replay is monotone in every duration).
  double bound(const CostModel& cm, const PlanPoint& p, int assigned = -1) const;
  size_t steps() const { return steps_; }  // what one replay walks
  // For bound() on partial cuts: the least step times of any one layer from each layer on
  // (they need `p`'s schedule and recompute only).
  void prepare(const CostModel& cm, const PlanPoint& p);

 private:
  struct Steps {
    double f = 0, b = 0, w = 0, r = 0, bytes = 0;  // one micro-batch on one replica
  };
  Steps step_times(const CostModel& cm, const PlanPoint& p, int first, int last,
                   int replicas) const;
  // Per global stage, one micro-batch on one replica (a stage not yet cut: the least of
  // any one layer left), the optimizer step per position, and per edge g -> g + 1 the
  // least time of its transfer.
  struct StageTimes {
    std::vector<double> f, b, w, r, opt, hop;
  };
  void stage_times(const CostModel& cm, const PlanPoint& p, int assigned, StageTimes& t) const;
  // Walks every position's order with the times `t`: the iteration time, or 0 where the
  // order cannot be followed.
  double replay(const StageTimes& t, int stages) const;
  std::vector<Steps> least_;  // [layer]: the least of one layer from there on, replicas 1
  SlotOrders orders_;
  int positions_ = 1, micro_batches_ = 1, iterations_ = 1;
  size_t steps_ = 0;
  bool v_shape_ = false, folded_w_ = true;
  FastestRoute hop_;
};

// CostModel::compute_time with the replicas splitting the micro-batch evenly, as the
// simulator times them (the cost model's slowest replica takes whole samples).
double per_replica_compute(const CostModel& cm, int first, int last, int replicas,
                           const ScheduleTraits& t);

// One micro-batch's passes of stage [first, last] on one of its `replicas` GPUs, split
// evenly, without recompute: forward, backward (input gradients only where `split_w`), the
// weight gradients apart (`split_w`; else 0) and what `p`'s recompute re-runs before the
// backward. b + w is the whole backward. plan_bound and OrderReplay both time passes so.
struct PassTimes {
  double f = 0, b = 0, w = 0, r = 0;
};
PassTimes pass_times(const CostModel& cm, const PlanPoint& p, int first, int last, int replicas,
                     bool split_w);

// The floor on stage [first, last]'s bytes on one of its `replicas` GPUs under the plan's
// traits, without cluster.gpu.reserved.
int64_t memory_floor(const CostModel& cm, int first, int last, int replicas,
                     const ScheduleTraits& t);
// The floor of the plan's fullest GPU, without cluster.gpu.reserved.
int64_t plan_memory_floor(const CostModel& cm, const PlanPoint& p);

// The least iteration time of any plan at cm's micro-batch and tensor degree with `context`
// ranks per layer, on at most `gpus` GPUs; `optimizer_s`: every parameter's optimizer step
// once (CostModel::optimizer_time of the whole model at tensor degree 1).
double work_bound(const CostModel& cm, int context, int gpus, double optimizer_s);

}  // namespace pipesim::planner
