// Generate + simulate an S-stage pipeline with M micro-batches, for every schedule.
// Target: >= 2 M ops/s on a 2-core CI machine for 64-stage DAPPLE
// with 1024 micro-batches (about 260 k ops with transfers), memory proportional to the ops
// (reported as bytes_per_op); the same figure per schedule.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "sim/engine.h"

namespace pipesim {
namespace {

std::string pipeline_yaml(int stages, int micro_batches, const std::string& schedule) {
  const bool split = schedule.starts_with("zb");
  const int v = schedule == "interleaved" || schedule == "zb-v" ? 2 : 1;  // chunks per GPU
  return fmt::format(R"(cluster:
  gpu: a100-80gb
  nodes: {nodes}
  gpus_per_node: 8
  intra_node: nvswitch
  inter_node: ib-hdr
model:
  layers:
    - {{name: block, repeat: {layers}, forward: 1 ms, {backward}, activation: 1 MiB, output: 4 MiB, params: 1M}}
training: {{global_batch: {M}, micro_batch: 1}}
strategy: {{schedule: {schedule}, pipeline: {S}{chunks}}}
)",
                     fmt::arg("nodes", (stages + 7) / 8), fmt::arg("S", stages),
                     fmt::arg("M", micro_batches), fmt::arg("layers", stages * v),
                     fmt::arg("chunks", schedule == "interleaved" ? ", virtual_stages: 2" : ""),
                     fmt::arg("schedule", schedule),
                     fmt::arg("backward", split ? "backward_input: 1 ms, backward_weight: 1 ms"
                                                : "backward: 2 ms"));
}

// The graph's own footprint: ops, dependency arrays (both directions) and streams.
size_t graph_bytes(const TaskGraph& g) {
  return g.size() * (sizeof(Op) + 2 * sizeof(uint32_t) + sizeof(OpId)) +
         g.num_deps() * 2 * sizeof(OpId);
}

void BM_GenerateAndSimulate(benchmark::State& state, const std::string& schedule) {
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

void BM_SimulateOnlyDapple(benchmark::State& state) {
  const Scenario sc = load_scenario_text(pipeline_yaml(64, 1024, "dapple"), "bench.yaml");
  const TaskGraph g = scenario_task_graph(sc);
  for (auto _ : state) benchmark::DoNotOptimize(simulate(g, sc.cluster).makespan);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * g.size()));
}
BENCHMARK(BM_SimulateOnlyDapple)->Unit(benchmark::kMillisecond);

void BM_GenerateOnlyDapple(benchmark::State& state) {
  const Scenario sc = load_scenario_text(pipeline_yaml(64, 1024, "dapple"), "bench.yaml");
  size_t ops = 0;
  for (auto _ : state) ops = scenario_task_graph(sc).size();
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ops));
}
BENCHMARK(BM_GenerateOnlyDapple)->Unit(benchmark::kMillisecond);

const int kRegistered = [] {
  for (const char* s : {"dapple", "gpipe", "gpipe-recompute", "pipedream", "pipedream-2bw",
                        "interleaved", "zb-h1", "zb-h2", "zb-1p", "zb-2p", "zb-v"}) {
    benchmark::RegisterBenchmark(fmt::format("BM_GenerateAndSimulate/{}", s).c_str(),
                                 [s](benchmark::State& st) { BM_GenerateAndSimulate(st, s); })
        ->Args({64, 1024})
        ->Unit(benchmark::kMillisecond);
  }
  return 0;
}();

}  // namespace
}  // namespace pipesim
