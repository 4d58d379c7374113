#include "api/internal/simulation.h"

#include <fmt/format.h>

#include <chrono>

#include "scenario/setup.h"
#include "scenario/work_estimate.h"

namespace pipesim {

namespace {

// What the scenario's slowdowns cost: the same run without them (SPEC section 10).
Report::Slowdowns slowdown_cost(Scenario& s, const RunInfo& info) {
  Report::Slowdowns out;
  for (const Cluster::Slowdown& x : s.cluster.slowdowns()) {
    out.applied.push_back(x.link ? fmt::format("{} at {:g} of its bandwidth",
                                               s.cluster.direction_name(2 * x.index), x.factor)
                                 : fmt::format("{} computing {:g}x slower",
                                               s.cluster.device(x.index).name, x.factor));
  }
  s.cluster.set_slowdowns(false);
  const TaskGraph graph = folded_task_graph(s);
  const Timeline timeline = simulate(graph, s.cluster, SimOptions{});
  out.iteration_time_without = make_report(graph, s.cluster, timeline, info).iteration_time;
  s.cluster.set_slowdowns(true);
  return out;
}

}  // namespace

Simulation simulate_scenario(Scenario scenario, const std::vector<Override>& overrides,
                             const SimulateOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!options.compact_collectives) check_work(estimate_work(scenario), Collectives::kExpanded);
  // Copies left implicit where they fold (nothing recorded per op of every copy).
  const bool implicit = options.fold && options.compact_collectives && !options.record_memory &&
                        !options.record_links;
  TaskGraph graph = implicit ? folded_task_graph(scenario)
                             : scenario_task_graph(scenario, options.compact_collectives);
  SimOptions sim;
  sim.record_memory = options.record_memory;
  sim.record_links = options.record_links;
  sim.exact_sharing = options.exact_sharing;
  sim.fold = options.fold;
  Timeline timeline = [&] {
    try {
      return simulate(graph, scenario.cluster, sim);
    } catch (InputError& e) {
      // Past 106 days of simulated time (the work estimate's bound is the compute alone).
      e.set_key_if_empty("training");
      e.set_location_if_empty({scenario.source, 0, 0});
      throw;
    }
  }();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const RunInfo info = run_info(scenario, options.reproducible ? 0.0 : wall, overrides);
  Report report = make_report(graph, scenario.cluster, timeline, info);
  if (!scenario.cluster.slowdowns().empty()) report.slowdown = slowdown_cost(scenario, info);
  return {std::move(scenario), std::move(graph), std::move(timeline), std::move(report)};
}

}  // namespace pipesim
