// Network scale. Targets on a 2-core CI machine:
//  - 1024 GPUs (128 nodes x 8): one 1 GiB all-reduce, each algorithm: <= 2 s, <= 2 GiB RAM;
//  - 1024 GPUs, pipeline 16 x data 64, M = 64, one iteration with bucketed gradient sync:
//    <= 5 s, <= 4 GiB RAM;
//  - an explicit chain of 10,000 GPUs read and routed: <= 2 s.
// peak_rss_mib is the process's high-water mark so far (benchmarks run in the order below).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/rss.h"
#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "schedules/collectives.h"
#include "sim/engine.h"

namespace pipesim {
namespace {

Cluster big_cluster() {
  return ClusterBuilder::shorthand(128, 8, *find_gpu_preset("h100-80gb"),
                                   *find_link_preset("nvswitch"), *find_link_preset("ib-ndr"));
}

void BM_AllReduce1GiB1024Gpus(benchmark::State& state) {
  const auto algo = static_cast<AllReduceAlgo>(state.range(0));
  const Cluster c = big_cluster();
  size_t ops = 0;
  Time t;
  for (auto _ : state) {
    TaskGraphBuilder b(c.num_devices());
    std::vector<CollectiveMember> members;
    for (int d = 0; d < c.num_devices(); ++d)
      members.push_back({d, c.device(d).node, {}, UINT32_MAX});
    add_allreduce(b, algo, members, int64_t{1} << 30, {0, 0});
    const TaskGraph g = std::move(b).build();
    t = simulate(g, c).makespan;
    ops = g.size();
  }
  state.SetLabel(std::string(to_string(algo)));
  state.counters["transfers"] = static_cast<double>(ops);
  state.counters["simulated_ms"] = t.seconds() * 1e3;
  state.counters["peak_rss_mib"] = peak_rss_mib();
}
BENCHMARK(BM_AllReduce1GiB1024Gpus)->DenseRange(0, 2)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_Pipeline16xData64(benchmark::State& state) {
  // A GPT-style model of 32 layers (2 per stage), 50 M params each, mixed-precision Adam.
  const std::string yaml = R"(cluster:
  gpu: h100-80gb
  nodes: 128
  gpus_per_node: 8
  intra_node: nvswitch
  inter_node: ib-ndr
model:
  layers: [{name: block, repeat: 32, forward: 1 ms, backward: 2 ms, activation: 500 MiB, output: 16 MiB, params: 50M}]
training: {global_batch: 4096, micro_batch: 1, precision: mixed, optimizer: adam}
strategy: {schedule: dapple, pipeline: 16, data: 64}
)";
  const Scenario sc = load_scenario_text(yaml, "bench.yaml");
  size_t ops = 0;
  Time t;
  for (auto _ : state) {
    const TaskGraph g = scenario_task_graph(sc);
    t = simulate(g, sc.cluster).makespan;
    ops = g.size();
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["simulated_ms"] = t.seconds() * 1e3;
  state.counters["peak_rss_mib"] = peak_rss_mib();
}
BENCHMARK(BM_Pipeline16xData64)->Iterations(1)->Unit(benchmark::kMillisecond);

// An explicit graph of N GPUs in a chain (N - 1 links), read and routed: the cluster part
// of loading a scenario (target: 10,000 GPUs under 2 s; reading it once took 46 s at 3000,
// every link's node copied into the document's memory).
void BM_LoadChainGraph(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  std::string yaml = "cluster:\n  gpu: a100-40gb\n  devices:\n";
  for (int i = 0; i < n; ++i) yaml += fmt::format("    - {{name: g{}}}\n", i);
  yaml += "  links:\n";
  for (int i = 0; i + 1 < n; ++i)
    yaml += fmt::format("    - {{between: [g{}, g{}], preset: pcie4}}\n", i, i + 1);
  yaml +=
      "model: {generator: transformer, layers: 4, hidden: 256, heads: 4, sequence: 128, vocab: "
      "1000}\ntraining: {global_batch: 8, micro_batch: 1, precision: mixed, optimizer: adam}\n"
      "strategy: {schedule: dapple, pipeline: 4, data: 2}\n";
  for (auto _ : state) {
    const Scenario s = load_scenario_text(yaml, "chain.yaml");
    benchmark::DoNotOptimize(s.cluster.route(0, n - 1).latency);
  }
}
BENCHMARK(BM_LoadChainGraph)
    ->Arg(1000)
    ->Arg(3000)
    ->Arg(10000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// An explicit graph of N GPUs on one switch, data-parallel over all of them: read, placed
// (one "server" of N GPUs: each pick once scanned every free count, N^2), and every route of
// its ring found (Dijkstra from each GPU, its tree kept in 4 bytes a vertex).
void BM_LoadStarGraphRing(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  std::string yaml = "cluster:\n  gpu: a100-40gb\n  devices:\n";
  for (int i = 0; i < n; ++i) yaml += fmt::format("    - {{name: g{}}}\n", i);
  yaml += "  switches: [{name: sw}]\n  links:\n";
  for (int i = 0; i < n; ++i) yaml += fmt::format("    - {{between: [g{}, sw], preset: pcie4}}\n", i);
  yaml += fmt::format(
      "model:\n  layers: [{{name: a, repeat: 2, forward: 1 ms, backward: 2 ms, params: 1M}}]\n"
      "training: {{global_batch: {}, micro_batch: 1}}\nstrategy: {{schedule: dapple, pipeline: 1, data: {}}}\n",
      n, n);
  for (auto _ : state) {
    const Scenario s = load_scenario_text(yaml, "star.yaml");
    Time sum;
    for (int i = 0; i < n; ++i) sum += s.cluster.route(i, (i + 1) % n).latency;
    benchmark::DoNotOptimize(sum);
  }
  state.counters["peak_rss_mib"] = peak_rss_mib();
}
BENCHMARK(BM_LoadStarGraphRing)->Arg(3000)->Arg(10000)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipesim
