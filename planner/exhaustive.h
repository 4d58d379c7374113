// `plan --exhaustive` (SPEC section 6) by branch and bound: the planner's own best (phases
// 1-3) is the incumbent; every plan of the space is walked stage by stage and a partial
// pipeline whose busiest position already computes for as long as the incumbent takes is
// cut off with everything under it (planner/bound.h: no plan is faster than its busiest
// GPU's compute). The rest are simulated by increasing bound, the incumbent falling as
// faster plans that fit turn up, until the next bound reaches it: then no plan left can be
// faster, and the best simulated is the optimum of the whole space. What cannot be
// finished (a time limit, plans too large to simulate, more plans below the incumbent than
// `kExhaustiveKept`) is said: the result is then not exhaustive, and its lower bound is the
// least bound left.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "planner/bound.h"
#include "planner/cost_model.h"
#include "planner/judge.h"
#include "planner/search.h"

namespace pipesim::planner {

// Plans below the incumbent kept at once (the lowest bounds; about 0.5 KiB each), and the
// most the walk visits before it stops.
inline constexpr size_t kExhaustiveKept = 200'000;
inline constexpr int64_t kExhaustiveWalk = 50'000'000;
// The most one replica vector of one schedule choice walks (deep interleaving on few
// micro-batches can leave millions of cuts below the incumbent); past it, the vector is
// left with its share as its bound.
inline constexpr int64_t kVectorWalk = 2'000'000;
// The most plans it simulates, and their predicted work in PlanOptions::sim_budget's units
// (20 budgets: about five minutes of one core).
inline constexpr int64_t kExhaustiveSimulations = 20'000;
inline constexpr double kExhaustiveWork = 20;

class Exhaustive {
 public:
  // `incumbent`: the best iteration time simulated so far among plans that fit (infinity if
  // none); `seen`: the plans already simulated (Judge::key_of). `prune` false keeps every
  // plan (tests compare the two).
  // The walk stops at the judge's deadline (the options' time limit).
  Exhaustive(const Judge& judge, const Cluster& cluster, const PlanOptions& options,
             double incumbent, std::set<std::string> seen, bool prune = true)
      : judge_(judge),
        cluster_(cluster),
        opt_(options),
        incumbent_(incumbent),
        seen_(std::move(seen)),
        prune_(prune) {
    // A plan must leave the headroom free of its GPU's memory, reserved bytes included.
    for (const Device& d : cluster.devices())
      room_ = std::max(room_, static_cast<int64_t>((1 - options.headroom) *
                                                   static_cast<double>(d.gpu.memory_bytes)) -
                                  d.gpu.reserved_bytes);
    hop_ = fastest_route(cluster);
  }

  // Every plan of one point of the space (schedule choice, data and tensor degree,
  // micro-batch b and M micro-batches per copy) on at most `gpus` GPUs.
  void offer(const CostModel& cm, const ScheduleChoice& choice, int data, int tensor, int64_t b,
             int64_t M, int gpus);

  // Only plans `keep` accepts (the fixed dimensions), judged on the pipeline's shape.
  void only(std::function<bool(const PlanPoint&)> keep) { only_ = std::move(keep); }

  struct Outcome {
    bool complete = false;   // the best found is the optimum of the space
    double lower_bound = 0;  // no plan of the space that fits is faster (seconds)
    int64_t bounded = 0;     // plans whose bound was computed
  };
  // The kept plans simulated by increasing bound; those simulated appended to `done`.
  Outcome solve(std::vector<Candidate>& done, Plan& result);

 private:
  struct Kept {
    double bound;
    int64_t floor;  // plan_memory_floor
    int64_t order;  // as the walk met it
    Costed plan;
  };
  static bool heap_order(const Kept& a, const Kept& b);
  void keep(double bound, int64_t floor, Costed c);
  // solve()'s warning when the walk did not cover the space, with every reason and the gap
  // to the lower bound.
  void warn_incomplete(const Outcome& out, double best, bool capped, double too_large,
                       Plan& result) const;
  // Plans bounded at or past this are not simulated: no faster than `best` by more than the
  // options' tolerance.
  double cutoff(double best) const { return best * (1 - opt_.tolerance); }
  // Every cut of the layers over `p`'s stages with replicas `reps` per position.
  void walk(const CostModel& cm, PlanPoint& p, const std::vector<int>& reps, int64_t M);
  void cuts(const CostModel& cm, PlanPoint& p, int64_t M, int g, int first,
            std::vector<double>& compute, std::vector<int64_t>& held);
  void leaf(const CostModel& cm, PlanPoint& p, int64_t M);

  const Judge& judge_;
  const Cluster& cluster_;
  const PlanOptions& opt_;
  double incumbent_;
  std::set<std::string> seen_;
  bool prune_;
  int64_t room_ = 0;
  std::optional<OrderReplay> replay_;  // of the pipeline shape being walked
  FastestRoute hop_;
  std::function<bool(const PlanPoint&)>
      only_;                // the most memory any GPU has past cluster.gpu.reserved
  std::vector<Kept> kept_;  // a max-heap on bound while offering
  double dropped_ = std::numeric_limits<double>::infinity();  // least bound not kept
  int64_t walked_ = 0, bounded_ = 0, vector_walked_ = 0;
  double unwalked_ = std::numeric_limits<double>::infinity();  // least share not walked
  int unfinished_ = 0;
  int faults_ = 0;  // plans simulated below their bound
  int64_t order_ = 0;
  bool timed_out_ = false;  // the walk reached the options' time limit
};

}  // namespace pipesim::planner
