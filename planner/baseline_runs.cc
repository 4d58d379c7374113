#include "planner/baseline_runs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "core/error.h"
#include "planner/baselines.h"
#include "planner/cost_model.h"
#include "sim/copies.h"

namespace pipesim::planner {

Scenario compared_scenario(const Scenario& base, const std::string& text) {
  try {
    return with_strategy_yaml(base, text, "--compare");
  } catch (const InputError& e) {
    throw InputError(fmt::format("'{}': {}", text, e.problem()), e.allowed(),
                     "--compare " + e.key(), {"<command line>"});
  }
}

std::vector<Compared> simulate_compared(const Scenario& base, const Judge& judge,
                                        const std::vector<std::string>& strategies,
                                        const std::vector<Candidate>& done) {
  std::vector<Compared> out;
  double best = std::numeric_limits<double>::infinity();
  for (const Candidate& c : done)
    if (c.fits() && !c.estimated_only) best = std::min(best, c.iteration_s);
  for (const std::string& text : strategies) {
    Compared x;
    x.given = text;
    Judge::simulate_scenario(compared_scenario(base, text), x.result);
    judge.mark_tight(x.result);
    x.rank = 1;
    for (const Candidate& c : done) x.rank += Judge::ranks_before(c, x.result);
    x.regret = std::isfinite(best) ? x.result.iteration_s / best - 1 : 0.0;
    judge.progress(fmt::format("compared {}: rank {}, {:+.1f} % against the best", text, x.rank,
                               100 * x.regret));
    out.push_back(std::move(x));
  }
  return out;
}

namespace {

// One baseline plan simulated with `placement`: its result, or why not.
Baseline simulate_baseline(const Scenario& base, const Judge& judge, double max_sim_work,
                           const StagePlan& sp, ScheduleKind kind, PlacementPolicy placement) {
  Baseline b;
  PlanPoint p;
  p.stages = sp.stages;
  p.data = sp.data;
  p.placement = placement;
  p.micro_batch = base.training.micro_batch;
  p.schedule = kind;
  const int64_t M = base.training.global_batch / (p.micro_batch * p.data);
  const Placement devices = p.devices(base.cluster);
  const planner::Estimate e = CostModel(base).estimate(p, M, &devices);
  if (e.work > max_sim_work) {
    b.error = fmt::format("too large to simulate here (work {:.3g}): {}", e.work, sp.note);
  } else if (judge.past_deadline() || !judge.may_finish(e.work)) {
    b.error = "not simulated: the time limit was reached";
  } else {
    try {
      b.result = judge.simulate_one(p, e);
      if (!b.result) b.error = "the loader refused the baseline's plan";
    } catch (const DeadlinePassed&) {
      b.error = "not simulated: the time limit was reached";
    } catch (const CopiesDoNotFold& x) {
      b.error = fmt::format("too large to simulate here ({}): {}", x.problem(), sp.note);
    }
  }
  return b;
}

}  // namespace

std::vector<Baseline> simulate_baselines(const Scenario& base, const Judge& judge,
                                         double max_sim_work, Clock::time_point t0) {
  std::vector<Baseline> out;
  const ScheduleKind kind =
      is_async(base.strategy.schedule) ? ScheduleKind::kPipeDream : ScheduleKind::kDapple;
  const std::pair<const char*, StagePlan (*)(const Scenario&, const Deadline&)> makers[] = {
      {"pipedream", &pipedream_baseline},
      {"dapple", &dapple_baseline},
      {"data_parallel", &data_parallel_baseline}};
  for (const auto& [name, make] : makers) {
    Baseline b;
    b.name = name;
    if (judge.past_deadline()) {
      b.error = "not planned: the time limit was reached";
      out.push_back(std::move(b));
      continue;
    }
    try {
      const StagePlan sp = make(base, judge.deadline());
      b.note = sp.note;
      // DAPPLE places a replicated pipeline by the best of its three policies: each is
      // simulated and the fastest that fits kept.
      std::vector<PlacementPolicy> placements{sp.placement};
      if (std::string_view(name) == "dapple" && sp.data > 1 && sp.stages.size() > 1)
        placements = {PlacementPolicy::kFreshFirst, PlacementPolicy::kAppendFirst,
                      PlacementPolicy::kScatterFirst};
      for (const PlacementPolicy placement : placements) {
        Baseline tried = simulate_baseline(base, judge, max_sim_work, sp, kind, placement);
        if (!tried.result) {
          if (!b.result && b.error.empty()) b.error = tried.error;
          continue;
        }
        const Candidate& c = *tried.result;
        if (!b.result || (c.fits() && !b.result->fits()) ||
            (c.fits() == b.result->fits() && c.iteration_s < b.result->iteration_s)) {
          b.result = std::move(tried.result);
          b.error.clear();
          if (placements.size() > 1)
            b.note = fmt::format(
                "{}; placed {} (the fastest of fresh-, append- and "
                "scatter-first in the simulation)",
                sp.note, to_string(placement));
        }
      }
    } catch (const InputError& e) {
      b.error = e.what();
    } catch (const DeadlinePassed&) {
      b.error = "not planned: the time limit was reached";
    }
    out.push_back(std::move(b));
  }
  judge.progress(fmt::format("baselines simulated at {:.2f} s", since(t0)));
  return out;
}

}  // namespace pipesim::planner
