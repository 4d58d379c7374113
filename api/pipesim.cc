#include "api/pipesim.h"

#include <chrono>

#include "api/report_fields.h"
#include "scenario/setup.h"
#include "scenario/work_estimate.h"

namespace pipesim {

Simulation simulate_scenario(Scenario scenario, const std::vector<Override>& overrides,
                             const SimulateOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!options.compact_collectives) check_work(estimate_work(scenario), Collectives::kExpanded);
  TaskGraph graph = scenario_task_graph(scenario, options.compact_collectives);
  SimOptions sim;
  sim.record_memory = options.record_memory;
  sim.record_links = options.record_links;
  sim.exact_sharing = options.exact_sharing;
  Timeline timeline = simulate(graph, scenario.cluster, sim);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const RunInfo info = run_info(scenario, options.reproducible ? 0.0 : wall, overrides);
  Report report = make_report(graph, scenario.cluster, timeline, info);
  return {std::move(scenario), std::move(graph), std::move(timeline), std::move(report)};
}

nlohmann::ordered_json run_report(const std::string& path, const std::vector<Override>& overrides,
                                  const SimulateOptions& options) {
  return at_scenario(path, [&] {
    const Simulation s = simulate_scenario(load_scenario(path, overrides), overrides, options);
    return nlohmann::ordered_json::parse(to_json(s.report));
  });
}

nlohmann::ordered_json plan_report(const std::string& path, const std::vector<Override>& overrides,
                                   const PlanOptions& options) {
  return at_scenario(path, [&] {
    nlohmann::ordered_json j = to_json(plan(path, overrides, options));
    add_version_and_overrides(j, overrides);
    return j;
  });
}

nlohmann::ordered_json sweep_report(const std::string& path, const std::vector<GridAxis>& axes,
                                    const SweepOptions& options) {
  return at_scenario(path, [&] { return to_json(run_sweep(path, axes, options)); });
}

}  // namespace pipesim
