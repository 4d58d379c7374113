// Generate + simulate a 64-stage DAPPLE pipeline with 1024 micro-batches (about 260 k ops
// with transfers). Target (issue: simulator core): >= 2 M ops/s on a 2-core CI machine,
// with memory proportional to the ops (reported as bytes_per_op).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "sim/engine.h"

namespace pipesim {
namespace {

std::string pipeline_yaml(int stages, int micro_batches, const char* schedule) {
  return fmt::format(R"(cluster:
  gpu: a100-80gb
  nodes: {nodes}
  gpus_per_node: 8
  intra_node: nvswitch
  inter_node: ib-hdr
model:
  layers:
    - {{name: block, repeat: {S}, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 4 MiB, params: 1M}}
training: {{global_batch: {M}, micro_batch: 1}}
strategy: {{schedule: {schedule}, pipeline: {S}}}
)",
                     fmt::arg("nodes", (stages + 7) / 8), fmt::arg("S", stages),
                     fmt::arg("M", micro_batches), fmt::arg("schedule", schedule));
}

// The graph's own footprint: ops, dependency arrays (both directions) and streams.
size_t graph_bytes(const TaskGraph& g) {
  return g.size() * (sizeof(Op) + 2 * sizeof(uint32_t) + sizeof(OpId)) +
         g.num_deps() * 2 * sizeof(OpId);
}

void run(benchmark::State& state, const char* schedule) {
  const Scenario sc = load_scenario_text(
      pipeline_yaml(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), schedule),
      "bench.yaml");
  size_t ops = 0, bytes = 0;
  for (auto _ : state) {
    const TaskGraph g = scenario_task_graph(sc);
    const Timeline tl = simulate(g, sc.cluster);
    benchmark::DoNotOptimize(tl.makespan);
    ops = g.size();
    bytes = graph_bytes(g) + tl.start.size() * 2 * sizeof(Time);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ops));
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["bytes_per_op"] = static_cast<double>(bytes) / static_cast<double>(ops);
}

void BM_GenerateAndSimulateDapple(benchmark::State& state) {
  run(state, "dapple");
}
void BM_GenerateAndSimulateGpipe(benchmark::State& state) {
  run(state, "gpipe");
}
BENCHMARK(BM_GenerateAndSimulateDapple)
    ->Args({64, 1024})
    ->Args({16, 256})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GenerateAndSimulateGpipe)->Args({64, 1024})->Unit(benchmark::kMillisecond);

void BM_SimulateOnlyDapple(benchmark::State& state) {
  const Scenario sc = load_scenario_text(pipeline_yaml(64, 1024, "dapple"), "bench.yaml");
  const TaskGraph g = scenario_task_graph(sc);
  for (auto _ : state) benchmark::DoNotOptimize(simulate(g, sc.cluster).makespan);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * g.size()));
}
BENCHMARK(BM_SimulateOnlyDapple)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipesim
