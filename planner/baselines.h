// The planners of the papers we compare against, reimplemented on our cost inputs:
// PipeDream's hierarchical dynamic program (Narayanan et al., SOSP'19, as its public
// optimizer_graph_hierarchical.py computes it), DAPPLE's planner (Fan et al., PPoPP'21, as
// its HPGO crate computes it) and plain data parallelism. Each returns a plan our scenario
// loader accepts, so the baseline's choice can be simulated beside our own planner's.
#pragma once

#include <string>
#include <vector>

#include "core/deadline.h"
#include "scenario/scenario.h"

namespace pipesim {

// A plan for one pipeline copy (consecutive stages covering every layer, each with its
// replica count) and the number of data-parallel copies; what the baselines return.
struct StagePlan {
  std::vector<StageSpec> stages;  // StageSpec{first_layer, last_layer, replicas, std::nullopt}
  int data = 1;
  // One line: how the baseline got it (e.g. "PipeDream DP: 15-1, predicted 12.3
  // ms/minibatch"), and what was changed to make it loadable.
  std::string note;
  // Where the copies go: DAPPLE's copy k runs stage s on GPU k of each of the stage's
  // units (device groups of data GPUs, one after another), so one stage's copies are
  // neighbours, as fresh-first places them when a stage's units fill a server.
  PlacementPolicy placement = PlacementPolicy::kAppendFirst;
};

// PipeDream: levels GPUs-in-a-node then nodes, each with its own bandwidth; per-stage
// replication, no data-parallel copies (data = 1). Times are the profile's per micro-batch.
// Each planner stops with DeadlinePassed past `deadline` (the DAPPLE search takes seconds on
// a thousand GPUs).
StagePlan pipedream_baseline(const Scenario& s, const Deadline& deadline = {});
// DAPPLE: stages with mp GPUs each in rp copies (replicas = mp, data = rp), chosen by the
// analytic iteration latency over its DP plans and all two-stage splits.
StagePlan dapple_baseline(const Scenario& s, const Deadline& deadline = {});
// One stage with every layer: the most GPUs that data copies times stage replicas can use.
StagePlan data_parallel_baseline(const Scenario& s, const Deadline& deadline = {});

}  // namespace pipesim
