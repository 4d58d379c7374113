// `pipesim plan` end to end: the embedded default scenario (16 GPUs, 26 layers: 15 splits
// x 3 schedules = 45 full simulations) and a 64-GPU BERT-48 (every split of 64 GPUs
// with at most 50 stages, under 3 schedules). Reported: strategies simulated per second.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>

#include "planner/planner.h"

namespace pipesim {
namespace {

void run_plan(benchmark::State& state, const std::string& file) {
  int evaluated = 0;
  for (auto _ : state) {
    const Plan p = plan(file, {}, PlanOptions{});
    evaluated = p.simulated;
    benchmark::DoNotOptimize(p.candidates.data());
  }
  state.counters["strategies"] = evaluated;
  state.counters["strategies_per_s"] =
      benchmark::Counter(static_cast<double>(evaluated) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_PlanDefault(benchmark::State& state) {
  run_plan(state, "");
}
BENCHMARK(BM_PlanDefault)->Unit(benchmark::kMillisecond);

void BM_PlanBert48On64Gpus(benchmark::State& state) {
  static const std::string file = [] {
    const std::string path =
        (std::filesystem::temp_directory_path() / "pipesim-bench-bert48-64.yaml").string();
    std::ofstream(path) << R"(cluster:
  gpu: a100-80gb
  nodes: 8
  gpus_per_node: 8
  intra_node: nvswitch2
  inter_node: ib-hdr
model: {include: bert48}
training: {global_batch: 512, micro_batch: 8, precision: mixed, optimizer: adam}
strategy: {schedule: dapple, pipeline: 8}
)";
    return path;
  }();
  run_plan(state, file);
}
BENCHMARK(BM_PlanBert48On64Gpus)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace pipesim
