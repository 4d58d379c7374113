// Strategy search (`pipesim plan`, SPEC section 6), in three phases:
//
//  1. Analytic: for every micro-batch size (when the model's costs follow from it), data-
//     parallel degree and schedule, a DP over stages, layers and GPUs (planner/search.h)
//     costs pipelines with uneven replicas and cuts chosen for compute, transfers and
//     memory, using at most the cluster's GPUs (fewer when that is faster).
//  2. Simulation, the judge: the best estimates, the estimated time/memory Pareto front and
//     their placement variants (fresh-first, append-first, scatter-first) are simulated in
//     full, in parallel threads, each as the scenario with its `strategy` (and micro-batch)
//     replaced and loaded through the same validation as a hand-written one. Ranked by
//     simulated throughput among those that fit in memory.
//  3. Local search by simulation (planner/refine.h) around the best simulated plans, where
//     each simulation is cheap.
//
// Baselines (PipeDream's and DAPPLE's planners, pure data parallel) go through the same
// simulator. `exhaustive` goes on from there by branch and bound over the whole space
// (planner/exhaustive.h) until no plan left can beat the best; every plan is reported with
// a proven lower bound on the iteration time of the space (planner/bound.h).
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "scenario/scenario.h"

namespace pipesim {

// A time limit given by the user (seconds): finite and above 0, else InputError naming
// `key` at `where` (0 is "no limit" only when no limit is given at all).
double checked_time_limit(double seconds, const std::string& key, const Location& where = {});

// What `--fix` takes.
inline constexpr const char* kFixable[] = {
    "training.micro_batch", "strategy.schedule", "strategy.pipeline", "strategy.virtual_stages",
    "strategy.data",        "strategy.tensor",   "strategy.context",  "strategy.expert",
    "strategy.zero",        "strategy.recompute"};
inline constexpr double kHeadroom = 0.90;  // the share the suggested alternative stays under

// The scenario's plan: every candidate is the scenario with another strategy and
// micro-batch (with_strategy), checked as a written one is. Throws InputError for a bad
// --compare strategy or a space it cannot search.
Plan plan(const Scenario& scenario, const PlanOptions& options);
// The file (`file` empty: the embedded default scenario) loaded with `overrides`, planned.
Plan plan(const std::string& file, const std::vector<Override>& overrides,
          const PlanOptions& options);

// Plan::warnings' memory line: a best plan at or past kTightMemory of capacity_bytes, with
// the first ranked candidate under kHeadroom (or that none is); none under --headroom.
std::vector<std::string> memory_warnings(const Plan& p);

// What makes the plan a failure to report (`pipesim plan` exits 1 for it), or "" when its
// best fits: no candidate, every one out of memory, or none leaving the headroom (the
// option as `headroom_option` names it).
std::string plan_problem(const Plan& p, const std::string& headroom_option);

// The best plan's iteration time over the lower bound, less 1 (none when nothing fits).
std::optional<double> optimality_gap(const Plan& p);

nlohmann::ordered_json to_json(const Plan& p);
std::string plan_table(const Plan& p);

}  // namespace pipesim
