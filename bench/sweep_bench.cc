// `pipesim sweep` throughput: points simulated per second on the toy 4-GPU scenario
// (scenarios/examples/toy-gpipe.yaml: 8 layers, 4 stages, global batch 64, 2 iterations),
// over gpipe and dapple at micro-batches 1..16 (64..4 micro-batches), on one thread and on
// every core. The README times the 10,000-point version of this grid (name=1..1000 as a
// third axis) from the command line.
#include <benchmark/benchmark.h>

#include "sweep/sweep.h"

namespace pipesim {
namespace {

void run(benchmark::State& state, int threads) {
  const std::string file = std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/toy-gpipe.yaml";
  // 2 x 5 x 4 = 40 points, every one valid.
  const std::vector<GridAxis> axes{parse_grid_axis("strategy.schedule=gpipe,dapple"),
                                   parse_grid_axis("training.micro_batch=1..16*2"),
                                   parse_grid_axis("name=1..4")};
  SweepOptions o;
  o.threads = threads;
  size_t points = 0, failed = 0;
  for (auto _ : state) {
    const Sweep s = run_sweep(file, axes, o);
    points += s.points.size();
    failed = s.failed;
  }
  state.counters["points_per_s"] =
      benchmark::Counter(static_cast<double>(points), benchmark::Counter::kIsRate);
  state.counters["failed"] = static_cast<double>(failed);
}

void BM_SweepOneThread(benchmark::State& state) {
  run(state, 1);
}
BENCHMARK(BM_SweepOneThread)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SweepEveryCore(benchmark::State& state) {
  run(state, 0);
}
BENCHMARK(BM_SweepEveryCore)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace pipesim
