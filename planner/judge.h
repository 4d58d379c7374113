// The planner's judge: plans simulated in full, one at a time or many in parallel (threads,
// and MPI ranks under mpirun), and ranked by simulated throughput among those that fit.
// Phases 2 and 3, the baselines and --exhaustive all go through it, so every plan the
// planner reports was loaded and simulated like a scenario given to `pipesim run`.
#pragma once

#include <limits>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/deadline.h"
#include "planner/cost_model.h"
#include "planner/plan.h"
#include "planner/shortlist.h"
#include "scenario/scenario.h"

namespace pipesim::planner {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The strategy section of a plan, in the form a scenario takes; strategy keys the planner
// does not search (all-reduce algorithm, buckets) are the scenario's.
nlohmann::ordered_json strategy_json(const PlanPoint& p, const Scenario& base);
// The same as values: the Strategy and GPUs the loader reads from strategy_json(p, base).
Strategy strategy_of(const PlanPoint& p, const Scenario& base);
StrategyPlacement placement_of(const PlanPoint& p, const Scenario& base);

class Judge {
 public:
  // `base` and `options` outlive the judge.
  Judge(const Scenario& base, const PlanOptions& options) : base_(base), opt_(options) {}

  // The options' time limit counts from t0: simulations still running past it stop
  // (DeadlinePassed, from simulate_one).
  void start_clock(Clock::time_point t0) {
    if (opt_.time_limit_s <= 0) return;
    // The last 5 % (at least 0.1 s, at most half) for ranking and writing the result.
    const double left = std::min(0.5 * opt_.time_limit_s, std::max(0.05 * opt_.time_limit_s, 0.1));
    deadline_ = after(t0, opt_.time_limit_s - left);
  }
  const Deadline& deadline() const { return deadline_; }
  // Whether the time limit has stopped the search (nothing more is started).
  bool past_deadline() const { return passed(deadline_); }
  // Whether a simulation of predicted `work` (CostModel::simulation_work, about a second
  // per million) may finish by the deadline: not started if even half of it would not (the
  // prediction errs both ways; past the deadline the engine stops it), as building its
  // task graph cannot be stopped.
  bool may_finish(double work) const {
    return !deadline_ || *after(Clock::now(), 0.5e-6 * work) <= *deadline_;
  }

  // A "pipesim plan: " line on the options' progress stream, if any (thread-safe).
  void progress(const std::string& line) const;

  // The scenario at micro-batch `b` (its model priced for it) with a strategy any
  // micro-batch takes; kept, one per size (thread-safe).
  const Scenario& at_micro_batch(int64_t b) const;
  // The scenario with a plan's strategy and micro-batch in place of its own, checked as a
  // written strategy is (InputError if it does not fit).
  Scenario scenario_of(const PlanPoint& p) const;
  // zb-v's greedy order builder refuses some stage costs and micro-batch counts (it needs
  // the V filled); such plans are not simulated. Every other schedule orders any plan.
  bool orderable(const PlanPoint& p) const;
  // One strategy simulated in full: the scenario with its strategy (and micro-batch)
  // replaced, loaded through the normal validation. Empty if the loader refuses it;
  // DeadlinePassed past the deadline; CopiesDoNotFold where its copies do not fold and
  // every copy's graph would be past PlanOptions::max_sim_work (too large to simulate).
  std::optional<Candidate> simulate_one(const PlanPoint& p,
                                        const planner::Estimate& estimate) const;
  // A plan the time limit left unsimulated, with its estimate for numbers
  // (Candidate::estimated_only): the answer when not even the best estimate's simulation
  // could finish.
  Candidate estimated_only(const Costed& c) const;
  // A loaded scenario simulated in full into `c`'s times, memory and what bounds it. Its
  // estimated work counts its data-parallel copies once (CostModel::simulation_work); where
  // they turn out not to fold and the graph of them all holds more than `max_ops` ops,
  // CopiesDoNotFold instead of a long simulation (before that graph is built; where no
  // group of copies may be built, `estimated_ops` stands for its size: lower_folded).
  static void simulate_scenario(const Scenario& sc, Candidate& c, const Deadline& deadline = {},
                                double max_ops = std::numeric_limits<double>::infinity(),
                                double estimated_ops = 0);
  // Candidate::tight for a simulated plan under the options' headroom.
  void mark_tight(Candidate& c) const;
  // On GPUs of different speeds: the plan with its layers split by each stage's slowest
  // GPU, simulated too; `c` becomes it when it ranks better.
  void speed_balanced(const Scenario& sc, Candidate& c) const;
  // Every plan of `list` on every core and rank; past the deadline (start_clock) the rest
  // are skipped, and those running stop; without one the first always runs. Counts skips
  // and refusals in `result`.
  std::vector<std::optional<Candidate>> simulate_all(const std::vector<Costed>& list,
                                                     Plan& result) const;
  // What tells two strategies apart: the strategy as pasted, and its micro-batch.
  std::string key_of(const PlanPoint& p) const;

  // Plans that fit first, then by throughput, peak memory and strategy text (the same
  // ranking whatever the thread count).
  static bool ranks_before(const Candidate& a, const Candidate& b);
  // `done` ranked into `result`: the estimate's error over all of them, the time/memory
  // Pareto front among those that fit, and the options' top few as the candidates.
  void finish(std::vector<Candidate>& done, Plan& result) const;

 private:
  // Plan::memory_error_* and memory_misses over `done`, with a warning for the misses.
  void memory_errors(const std::vector<Candidate>& done, Plan& result) const;

  const Scenario& base_;
  const PlanOptions& opt_;
  mutable std::mutex progress_mutex_;
  mutable std::mutex scenarios_mutex_;
  mutable std::map<int64_t, std::unique_ptr<Scenario>> scenarios_;
  Deadline deadline_;
};

}  // namespace pipesim::planner
