// Strategy search (`pipesim plan`): every way to use the scenario's GPUs as
// pipeline stages x stage replicas x data-parallel copies, with the model split into
// stages of balanced compute (schedules/partition.h), under a few schedules, each
// simulated end to end; ranked by throughput among those that fit in memory.
//
// Every candidate is the scenario with its `strategy` section replaced, loaded through
// the same validation as a hand-written one, so each can be pasted back into a scenario.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenario/scenario.h"

namespace pipesim {

struct PlanOptions {
  int top = 10;  // candidates kept in the result
  // Skip candidates whose task graph would exceed this many compute ops (keeps a plan of a
  // large cluster to minutes); they are counted as skipped.
  int64_t max_ops = 4'000'000;
};

struct Candidate {
  nlohmann::ordered_json strategy;  // the scenario's strategy section, in its YAML form
  int pipeline = 1, replicas = 1, data = 1;
  int64_t micro_batches = 1;
  std::string schedule;
  double makespan_s = 0;
  double throughput = 0;
  int64_t peak_memory = 0;
  bool oom = false;
};

struct Plan {
  std::vector<Candidate> candidates;  // best first: fitting by throughput, then OOM by memory
  int evaluated = 0;
  int rejected = 0;  // invalid for this scenario (e.g. micro-batches not divisible)
  int skipped = 0;   // over PlanOptions::max_ops
};

// `file` empty: the embedded default scenario. `overrides` apply before the search.
Plan plan(const std::string& file, const std::vector<Override>& overrides,
          const PlanOptions& options);

nlohmann::ordered_json to_json(const Plan& p);
std::string plan_table(const Plan& p);

}  // namespace pipesim
