// The public library API: what the Python module, the installed CMake package and other
// programs embed. Each call loads a scenario (a YAML file, or the embedded default when the
// path is empty), applies `--set` style overrides before validation, and returns exactly
// what the command line writes with `--json`: a run's report, a plan, a sweep. Bad input throws
// InputError with the scenario's location, whose message() is the text after "pipesim: error: " on
// the command line.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "planner/planner.h"
#include "scenario/scenario.h"
#include "schedules/task_graph.h"
#include "sim/engine.h"
#include "sim/report.h"
#include "sweep/sweep.h"

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
  // step). Off where every step must be an op of its own: traces, op CSVs, backends.
  bool compact_collectives = true;
  bool exact_sharing = false;  // SimOptions::exact_sharing (`pipesim run --exact-sharing`)
};

// Builds the TaskGraph of a loaded scenario, simulates it and makes its report; `overrides`
// are the ones the scenario was loaded with, echoed in the report.
Simulation simulate_scenario(Scenario scenario, const std::vector<Override>& overrides = {},
                             const SimulateOptions& options = {});

// `pipesim run [path] --set K=V... --json -`, as JSON (`options.reproducible`: --reproducible,
// `options.exact_sharing`: --exact-sharing).
nlohmann::ordered_json run_report(const std::string& path,
                                  const std::vector<Override>& overrides = {},
                                  const SimulateOptions& options = {});

// `pipesim plan [path] --json -`, as JSON. Progress goes to options.progress when set.
nlohmann::ordered_json plan_report(const std::string& path,
                                   const std::vector<Override>& overrides = {},
                                   const PlanOptions& options = {});

// `pipesim sweep [path] --grid ... --json -`, as JSON (sweep/sweep.h's to_json).
nlohmann::ordered_json sweep_report(const std::string& path, const std::vector<GridAxis>& axes,
                                    const SweepOptions& options = {});

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
