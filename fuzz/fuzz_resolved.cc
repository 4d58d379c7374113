// The resolved scenario (`run --resolved`) round trip: a scenario that loads is written as
// YAML, read back, and must give the same resolved text again and (when small) the same
// report; a scenario that does not load must be an InputError, as in fuzz_scenario.
#include "fuzz/harness.h"
#include "scenario/resolved.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pipesim::fuzz::expect_result_or_input_error([&] {
    const pipesim::Scenario first = pipesim::load_scenario_text(text, "fuzz.yaml");
    const std::string resolved = pipesim::resolved_scenario_yaml(first, {});
    // What pipesim wrote, it must read.
    const pipesim::Scenario again = [&] {
      try {
        return pipesim::load_scenario_text(resolved, "resolved.yaml");
      } catch (const pipesim::InputError&) {
        __builtin_trap();
      }
    }();
    if (pipesim::resolved_scenario_yaml(again, {}) != resolved) __builtin_trap();
    const pipesim::WorkEstimate w = pipesim::estimate_work(first);
    if (w.ops() > pipesim::fuzz::kMaxFuzzOps || w.devices > 256) return;
    const auto report_of = [](const pipesim::Scenario& sc) {
      const pipesim::TaskGraph graph = pipesim::scenario_task_graph(sc);
      const pipesim::Timeline tl = pipesim::simulate(graph, sc.cluster, {});
      pipesim::RunInfo info = pipesim::run_info(sc, 0.0);
      info.scenario.clear();
      return pipesim::to_json(pipesim::make_report(graph, sc.cluster, tl, info));
    };
    if (report_of(first) != report_of(again)) __builtin_trap();
  });
  return 0;
}
