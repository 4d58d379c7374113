// A point of the planner's search space (a strategy plus its micro-batch size), what its
// schedule does to the estimate's terms, and where its devices are.
#pragma once

#include <cstdint>
#include <vector>

#include "scenario/scenario.h"
#include "topology/placement.h"

namespace pipesim::planner {

// One point of the search space: a scenario's strategy plus its micro-batch size.
struct PlanPoint {
  std::vector<StageSpec> stages;  // global stages (positions x v for interleaved)
  int data = 1;
  int64_t micro_batch = 1;
  ScheduleKind schedule = ScheduleKind::kDapple;
  int virtual_stages = 1;
  Warmup warmup = Warmup::kSchedule;
  Recompute recompute = Recompute::kNone;
  int tensor = 1;                  // every stage's tensor-parallel degree
  bool sequence_parallel = false;  // Megatron sequence parallelism (tensor > 1)
  int zero = 0;                    // ZeRO stage over each stage's data-parallel ranks
  int context = 1, expert = 1;     // Strategy::context, Strategy::expert
  int expert_tensor = 1;           // Strategy::expert_tensor (the scenario's)
  // Context or expert groups: whole stages, placed in Megatron-Core's rank order.
  bool rank_groups() const { return context > 1 || expert > 1 || expert_tensor > 1; }
  PlacementPolicy placement = PlacementPolicy::kAppendFirst;
  // A policy per position when they differ (then written as explicit device lists); empty:
  // `placement` for every stage.
  std::vector<PlacementPolicy> stage_placement;

  int positions() const { return static_cast<int>(stages.size()) / virtual_stages; }
  // The position (device group) of global stage g: interleaved chunks go round the
  // positions, zb-v's second chunk comes back up them (Strategy::position_of).
  int position_of(int g) const {
    const int P = positions();
    return schedule == ScheduleKind::kZbV && g >= P ? 2 * P - 1 - g : g % P;
  }
  int gpus() const;  // data x replicas of every position
  // [copy][position] -> devices, as the scenario loader places them.
  Placement devices(const Cluster& c) const;
  friend bool operator==(const PlanPoint&, const PlanPoint&) = default;
};

// `p`'s data-parallel twin: where every stage has the same r > 1 replicas and they split
// each micro-batch evenly (r divides b), r times the data-parallel copies at micro-batch
// b / r, one replica a stage. The two run the same work per GPU (stage_profiles prices a
// replica at its samples) and differ only in where their GPUs sit, but the replicas cost r
// times the simulation (copies fold, replicas do not). Otherwise (and under PipeDream,
// whose replicas take whole micro-batches in turn) `p` itself.
PlanPoint data_twin(const PlanPoint& p);

// What a schedule does to the terms above.
struct ScheduleTraits {
  Recompute recompute = Recompute::kNone;  // full: t += F; selective: t += attention core
  bool all_in_flight = false;              // GPipe: M micro-batches of activations
  bool deep = false;                       // 2(S - s) - 1 in flight (deep / auto warm-up, ZB-H2)
  bool exposed_hops = false;               // 1F1B with the shallow warm-up: hops not hidden
  int w_fill = 0;                          // zero bubble: W fills the bubble (1: ZB-H1, 2: ZB-H2)
  bool async = false;                      // no flush: PipeDream, 2BW
  int stashed = 0;                         // -1: PipeDream's S - s - 1 versions; else that many
  bool take_turns = false;                 // replicas take whole micro-batches in turn
  // zb-1p / zb-2p: the order builder defers W while the stage's activations stay under its
  // memory limit (w_fill x S micro-batches' activations, p M_B or 2p M_B), so every stage
  // may hold that many (ZB-H1/H2's fixed orders hold fewer on the later stages).
  bool fills_limit = false;
  // ZeRO stage and the data-parallel copies it shards over (with each stage's replicas):
  // 1-3 shard optimizer state, gradients, weights over replicas x data ranks and the
  // optimizer step with them; 3 all-gathers a stage's weights before each pass.
  int zero = 0;
  int data = 1;
  bool sequence_parallel = false;  // Korthikanti's replicated activations split by tensor too
};
ScheduleTraits traits(ScheduleKind k, Warmup w, Recompute r = Recompute::kNone);
// The traits of a whole plan point (schedule, recompute, ZeRO over its data degree, SP).
ScheduleTraits traits(const PlanPoint& p);

// `p` under each of DAPPLE's placement policies for every stage (append-first, fresh-first,
// scatter-first), after `p` as it is when `with_own`, each with the devices it names;
// a variant on the same devices as one before it is left out.
struct PlacedPoint {
  PlanPoint plan;
  Placement devices;
};
std::vector<PlacedPoint> placement_variants(const PlanPoint& p, const Cluster& c, bool with_own);

}  // namespace pipesim::planner
