// What a plan is (SPEC section 6): its options, its candidates (each a strategy and
// micro-batch with its estimate and its simulation), the baselines and the user's own
// strategies compared, and the whole search's figures. planner/planner.h makes one.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "planner/cost_model.h"

namespace pipesim {

struct PlanOptions {
  int top = 10;             // candidates kept in the result
  int threads = 0;          // simulation threads; 0: every core
  double time_limit_s = 0;  // the whole plan returns within this, from `start` (0: no limit)
  // When the time limit starts counting: when the options were made (a command's start,
  // before its scenario is read).
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool exhaustive = false;  // the optimum of the whole space (branch and bound)
  bool prune = true;        // with exhaustive: false simulates every plan (tests)
  // With exhaustive: plans no more than this share faster than the best are not simulated
  // (0: the exact optimum; the default is MIP solvers' usual relative gap, 0.01 %).
  double tolerance = 1e-4;
  std::ostream* progress = nullptr;  // progress lines (costed, simulated, best so far)
  int simulate = 0;                  // strategies to simulate in phase 2; 0: max(2 top, 24)
  bool baselines = true;
  // Strategies whose simulation would cost more than this (CostModel::simulation_work, about
  // a second per million on one core) are not simulated.
  double max_sim_work = 4e6;
  // Phase 2 simulates the chosen strategies, best estimate first, until their predicted
  // work adds up to this (the first always runs): about 15 s of one core.
  double sim_budget = 1.5e7;
  // Phase 1 and phase 2's choice alone: nothing simulated, no baselines (benchmarks).
  bool analytic_only = false;
  // The user's own strategies (`--compare`, each a strategy mapping as --set strategy=...
  // takes), simulated and ranked against the plans the planner simulated.
  std::vector<std::string> compare;
  // Rank only plans whose peak leaves this share of the GPUs' memory free (`--headroom`).
  double headroom = 0;
  // Dimensions kept at the scenario's value (`--fix`, kFixable): the space searched, by the
  // planner and --exhaustive alike, is the rest.
  std::vector<std::string> fix;
};

struct Candidate {
  planner::PlanPoint point;
  nlohmann::ordered_json strategy;     // pasteable into a scenario's strategy section
  std::optional<int64_t> micro_batch;  // training.micro_batch, when it differs from the scenario's
  double estimate_s = 0;               // the analytic iteration time
  int64_t estimated_memory = 0;        // the analytic peak memory per GPU (bytes)
  double makespan_s = 0, iteration_s = 0, throughput = 0;
  int64_t peak_memory = 0;
  bool oom = false;
  bool tight = false;  // fits, but leaves less than PlanOptions::headroom free
  // Not simulated (the time limit stopped it): its times and memory are the estimate's.
  bool estimated_only = false;
  std::string why;  // what bounds it
  // With training.failures: the share of wall time that makes progress (SPEC section 10);
  // the planner then ranks by throughput x goodput.
  std::optional<double> goodput;
  double goodput_throughput() const { return throughput * goodput.value_or(1.0); }
  bool fits() const { return !oom && !tight; }
};

struct Baseline {
  std::string name;  // pipedream | dapple | data_parallel
  std::string note;  // how the baseline planner got its plan
  std::optional<Candidate> result;
  std::string error;  // when the plan could not be simulated
};

// A strategy of the user's, simulated like a candidate: `rank` among every plan the planner
// simulated (1: better than all of them), `regret` its iteration time over the best's less 1
// (below 0 when it beats the planner).
struct Compared {
  std::string given;  // as the user wrote it
  Candidate result;
  int rank = 0;
  double regret = 0;
};

struct Plan {
  std::vector<Candidate> candidates;  // best first: fitting by throughput, then OOM by memory
  std::vector<Candidate> pareto;      // simulated, no other is both faster and smaller
  std::vector<Baseline> baselines;
  std::vector<Compared> compared;
  int64_t explored = 0;  // strategies costed
  int64_t bounded = 0;   // of those, ruled out by a lower bound on their time alone
  int simulated = 0;     // strategies simulated in full
  int rejected = 0;      // simulated candidates the loader refused (should stay 0)
  int too_large = 0;     // chosen by the estimate but too large to simulate
  int over_budget = 0;   // chosen but past PlanOptions::sim_budget
  bool timed_out = false;
  double wall_s = 0;
  double analytic_s = 0;                                   // phase 1 alone
  double estimate_error_mean = 0, estimate_error_max = 0;  // |estimate - simulated| / simulated
  // The same of peak memory, and the plans the estimate said fit that ran out of memory.
  double memory_error_mean = 0, memory_error_max = 0;
  int memory_misses = 0;
  // No plan of the searched space that fits is faster (planner/bound.h; with an exhaustive
  // search, the least bound it left unsimulated), and whether the search covered the space.
  double lower_bound_s = 0;
  bool exhaustive = false;
  double tolerance = 0;            // with exhaustive: PlanOptions::tolerance
  double headroom = 0;             // PlanOptions::headroom
  std::vector<std::string> fixed;  // PlanOptions::fix
  int64_t capacity_bytes = 0;      // the smallest GPU memory of the cluster
  // What the user should hear of (SPEC: nothing silent): a best plan within kTightMemory of
  // the GPUs' memory, and the first candidate with kHeadroom to spare.
  std::vector<std::string> warnings;
};

// A plan past this share of GPU memory is tight: allocator fragmentation, NCCL buffers and
// the CUDA context, which a scenario counts only in cluster.gpu.reserved, may not fit.
inline constexpr double kTightMemory = 0.95;

}  // namespace pipesim
