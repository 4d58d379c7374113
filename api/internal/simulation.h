// One scenario simulated with its report: what the command line's `run` and the public API
// (api/pipesim.h) share. Not installed.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "scenario/scenario.h"
#include "schedules/task_graph.h"
#include "sim/engine.h"
#include "sim/report.h"

namespace pipesim {

// One simulated scenario: what every report writer (JSON, trace, CSV, summary) reads.
struct Simulation {
  Scenario scenario;
  TaskGraph graph;
  Timeline timeline;
  Report report;
};

struct SimulateOptions {
  bool record_memory = false;  // the memory timeline, for traces and --memory-csv
  bool record_links = false;   // link utilisation, for traces
  bool reproducible = false;   // report wall_s as 0, so equal inputs give equal reports
  // Ring collectives as CompactRing (the same timeline; n ops per ring instead of one per
  // step). Off where every step must be an op of its own: op CSVs, backends. (Traces keep
  // them compact: a member's op is its collective's slice on that GPU.)
  bool compact_collectives = true;
  bool exact_sharing = false;  // SimOptions::exact_sharing (`pipesim run --exact-sharing`)
  bool fold = true;            // SimOptions::fold (off: `pipesim run --no-fold`)
};

// Builds the TaskGraph of a loaded scenario, simulates it and makes its report; `overrides`
// are the ones the scenario was loaded with, echoed in the report.
Simulation simulate_scenario(Scenario scenario, const std::vector<Override>& overrides = {},
                             const SimulateOptions& options = {});

// Runs `f`; an InputError without a location (one found while building or simulating, such
// as a transfer too large) gets the scenario's: the file, or "<default>".
template <typename F>
auto at_scenario(const std::string& path, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (InputError& e) {
    e.set_location_if_empty({path.empty() ? "<default>" : path});
    throw;
  }
}

}  // namespace pipesim
