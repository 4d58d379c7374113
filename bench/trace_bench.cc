// `pipesim run --trace` against `pipesim run`, side by side: the same pipeline x data job
// simulated as the command line does (simulate_scenario with its options), with and
// without the trace (memory changes and link samples recorded, the trace written to
// memory). Identical copies fold in both (sim/copies.h), so what the trace adds is the
// graph of every copy (the plain run leaves copies implicit) and writing every GPU's
// events. Target (issue: planning at scale): a trace <= 3x the run without where the run
// is not folded; at D copies the trace still writes D times copy 0's events, so its
// ratio to a folded run grows with D (the output's size), not with the simulation.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <ostream>

#include "api/internal/simulation.h"
#include "bench/pipeline_data.h"
#include "core/counting_buf.h"
#include "scenario/scenario.h"
#include "sim/trace.h"

namespace pipesim {
namespace {

// range(0): stages; range(1): micro-batches; range(2): data-parallel copies; range(3): 0 run,
// 1 run with the trace; range(4): SimOptions::fold.
void BM_RunTrace(benchmark::State& state) {
  const auto S = state.range(0), M = state.range(1), D = state.range(2);
  const std::string yaml = pipeline_data_yaml(S, M, D, 8);
  const Scenario sc = load_scenario_text(yaml, "bench.yaml");
  const bool trace = state.range(3) != 0;
  size_t bytes = 0;
  for (auto _ : state) {
    SimulateOptions o;
    o.record_memory = o.record_links = trace;
    o.fold = state.range(4) != 0;
    const Simulation run = simulate_scenario(sc, {}, o);
    if (trace) {
      CountingBuf sink;
      std::ostream out(&sink);
      write_trace(out, run.graph, run.scenario.cluster, run.timeline);
      bytes = sink.size;
    }
    benchmark::DoNotOptimize(run.report.makespan);
  }
  state.counters["trace_mib"] = static_cast<double>(bytes) / 1048576.0;
  state.SetLabel(fmt::format("{} x {} x data {}{}{}", S, M, D, trace ? " --trace" : "",
                             state.range(4) != 0 ? "" : " --no-fold"));
}
BENCHMARK(BM_RunTrace)
    ->ArgsProduct({{64}, {2048}, {2}, {0, 1}, {0, 1}})
    ->ArgsProduct({{8}, {128}, {32}, {0, 1}, {0, 1}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipesim
