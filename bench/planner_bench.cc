// `pipesim plan` end to end (analytic DP, then the chosen strategies simulated in full on
// every core, baselines included) on 16, 64, 256 and 1024 GPUs. Counters: strategies
// costed, strategies simulated, and costed per second of the whole plan.
// Target (issue: planner): 1024 GPUs with a 96-layer transformer in under 60 s on 2 cores.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "planner/planner.h"

namespace pipesim {
namespace {

std::string write(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

void run_plan(benchmark::State& state, const std::string& file) {
  Plan p;
  for (auto _ : state) {
    p = plan(file, {}, PlanOptions{});
    benchmark::DoNotOptimize(p.candidates.data());
  }
  state.counters["costed"] = static_cast<double>(p.explored);
  state.counters["simulated"] = p.simulated;
  state.counters["costed_per_s"] = benchmark::Counter(
      static_cast<double>(p.explored) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

// 16 V100s on 2 nodes, GPT-2-medium-sized (the embedded default scenario).
void BM_Plan16Gpus(benchmark::State& state) {
  run_plan(state, "");
}
BENCHMARK(BM_Plan16Gpus)->Unit(benchmark::kMillisecond);

void BM_Plan64GpusBert48(benchmark::State& state) {
  static const std::string file = write("pipesim-bench-bert48-64.yaml", R"(cluster:
  gpu: a100-80gb
  nodes: 8
  gpus_per_node: 8
  intra_node: nvswitch2
  inter_node: ib-hdr
model: {include: bert48}
training: {global_batch: 512, micro_batch: 8, precision: mixed, optimizer: adam}
strategy: {schedule: dapple, pipeline: 8}
)");
  run_plan(state, file);
}
BENCHMARK(BM_Plan64GpusBert48)->Unit(benchmark::kMillisecond)->Iterations(1);

constexpr const char* kGpt = R"(cluster:
  gpu: {gpu}
  nodes: {nodes}
  gpus_per_node: 8
  intra_node: nvswitch
  inter_node: {inter}
model: {{generator: transformer, layers: {layers}, hidden: {hidden}, heads: {heads}, sequence: 2048, vocab: 51200}}
training: {{global_batch: {batch}, micro_batch: 1, precision: mixed, optimizer: adam}}
strategy: {{schedule: dapple, pipeline: 8}}
)";

void BM_Plan256GpusGpt(benchmark::State& state) {
  static const std::string file =
      write("pipesim-bench-gpt-256.yaml",
            fmt::format(kGpt, fmt::arg("gpu", "a100-80gb"), fmt::arg("nodes", 32),
                        fmt::arg("inter", "ib-hdr"), fmt::arg("layers", 48),
                        fmt::arg("hidden", 6144), fmt::arg("heads", 48), fmt::arg("batch", 512)));
  run_plan(state, file);
}
BENCHMARK(BM_Plan256GpusGpt)->Unit(benchmark::kMillisecond)->Iterations(1);

// 128 x 8 H100 on NDR InfiniBand, a 96-layer GPT-3-sized transformer, global batch 1536.
void BM_Plan1024GpusGpt96(benchmark::State& state) {
  static const std::string file =
      write("pipesim-bench-gpt-1024.yaml",
            fmt::format(kGpt, fmt::arg("gpu", "h100-80gb"), fmt::arg("nodes", 128),
                        fmt::arg("inter", "ib-ndr"), fmt::arg("layers", 96),
                        fmt::arg("hidden", 12288), fmt::arg("heads", 96), fmt::arg("batch", 1536)));
  run_plan(state, file);
}
BENCHMARK(BM_Plan1024GpusGpt96)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace pipesim
