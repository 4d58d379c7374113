// How the simulator grows with the cluster: one all-reduce over 128 -> 8192 GPUs for each
// algorithm, and pipeline x data jobs of growing width. Each row prints the simulator's
// events/s, ops/s and bytes per op (the graph and timeline footprint divided by the ops)
// so that growth is visible at a glance: a row whose events/s falls as the GPUs grow has
// a cost that grows faster than the work.
//
// Targets on a 2-core machine, in CPU seconds (run one row at a time with
// --benchmark_filter and read user+sys from /usr/bin/time):
//   4 MB ring all-reduce over 8192 GPUs        <= 20 CPU-s, <= 2 GiB
//   1 GiB tree all-reduce over 2048 GPUs       <= 2 CPU-s, and <= 10x a bare heap DES per
//     event (BM_BareHeapDes on the same graph; ns/event side by side)
//   4096 GPUs, 64 stages x 1024 micro-batches x 64 copies (17 M ops)   <= 15 CPU-s, <= 2 GiB
//   4 MB ring over 8192 GPUs, default against no-fold: <= 0.1x the events (0.001x)
//   pipeline 8 x 64 x data 256 -> data 1024 (2048 -> 8192 GPUs, a NIC per GPU), default:
//   <= 1.5x the CPU (about 3.6x, at 4.1 ms for 8192 GPUs against 9.4-9.9 ms before the
//   copies' routes were checked without being kept and the fold found once: copies are
//   built and simulated once, sim/copies.h; what grows is the cluster's per-device and
//   per-link tables and checking copy 0's routes in every copy; 11x with --no-fold). Data 8
//   (64 GPUs) is the part that does not grow: about 0.35 ms.
// Rows whose fourth argument is 1 keep ring collectives compact (TaskGraphBuilder::
// set_compact_rings); the 8192-GPU ring row runs only compact (expanded, it is 134 M ops).
// The last argument of the compact rows is SimOptions::fold: 1 runs symmetric rings as
// phases, 0 step by step (`--no-fold`); the pair side by side is the phases' gain.
// peak_rss_mib is the process's high-water mark so far (rows run in the order below).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/pipeline_data.h"
#include "bench/rss.h"
#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "schedules/collectives.h"
#include "sim/engine.h"

namespace pipesim {
namespace {

// The graph's own footprint plus the timeline's start/end per op.
size_t footprint(const TaskGraph& g) {
  return g.size() * (sizeof(Op) + 2 * sizeof(uint32_t) + sizeof(OpId) + 2 * sizeof(Time)) +
         g.num_deps() * 2 * sizeof(OpId);
}

// What one iteration measured, turned into counters once the timed loop is over.
struct Run {
  double events = 0, ops = 0, bytes = 0, simulated_ms = 0;
  void note(const TaskGraph& g, const Timeline& tl) {
    events = static_cast<double>(tl.events);
    ops = static_cast<double>(g.size());
    bytes = static_cast<double>(footprint(g));
    simulated_ms = tl.makespan.seconds() * 1e3;
  }
  void report(benchmark::State& state) const {
    const auto iters = static_cast<double>(state.iterations());
    state.counters["events/s"] = benchmark::Counter(events * iters, benchmark::Counter::kIsRate);
    state.counters["ns/event"] = benchmark::Counter(
        events * iters, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["ops/s"] = benchmark::Counter(ops * iters, benchmark::Counter::kIsRate);
    state.counters["ops"] = ops;
    state.counters["bytes/op"] = bytes / ops;
    // The whole process's high-water mark per op: meaningful when the row runs alone.
    state.counters["rss/op"] = peak_rss_mib() * 1048576.0 / ops;
    state.counters["simulated_ms"] = simulated_ms;
    state.counters["peak_rss_mib"] = peak_rss_mib();
  }
};

// nodes x 8 H100s on NVSwitch, nodes on one InfiniBand NDR fabric.
Cluster cluster_of(int gpus) {
  return ClusterBuilder::shorthand(gpus / 8, 8, *find_gpu_preset("h100-80gb"),
                                   *find_link_preset("nvswitch"), *find_link_preset("ib-ndr"));
}

// range(0): GPUs; range(1): algorithm; range(2): bytes; range(3): 1 for compact rings
// (TaskGraphBuilder::set_compact_rings), 0 for one transfer per step and member; range(4):
// 1 for SimOptions::exact_sharing (whole-component re-rating at every flow event); range(5):
// SimOptions::fold.
void BM_AllReduce(benchmark::State& state) {
  const Cluster c = cluster_of(static_cast<int>(state.range(0)));
  const auto algo = static_cast<AllReduceAlgo>(state.range(1));
  std::vector<CollectiveMember> members;
  for (int d = 0; d < c.num_devices(); ++d)
    members.push_back({d, c.device(d).node, {}, UINT32_MAX});
  Run run;
  for (auto _ : state) {
    // The time (and ns/event) is the simulation's; building the graph is left out, as the
    // bare DES below leaves it out.
    state.PauseTiming();
    TaskGraphBuilder b(c.num_devices());
    b.set_compact_rings(state.range(3) != 0);
    add_allreduce(b, algo, members, state.range(2), {0, 0});
    const TaskGraph g = std::move(b).build();
    state.ResumeTiming();
    SimOptions o;
    o.exact_sharing = state.range(4) != 0;
    o.fold = state.range(5) != 0;
    run.note(g, simulate(g, c, o));
  }
  run.report(state);
  state.SetLabel(fmt::format("{} {} MiB{}{}{}", to_string(algo), state.range(2) >> 20,
                             state.range(3) != 0 ? " compact" : "",
                             state.range(4) != 0 ? " exact" : "",
                             state.range(3) != 0 && state.range(5) == 0 ? " no-fold" : ""));
}
constexpr int64_t kMiB = int64_t{1} << 20;
BENCHMARK(BM_AllReduce)
    ->ArgsProduct({{128, 512, 2048}, {0}, {4 * kMiB}, {0}, {0}, {1}})
    ->ArgsProduct({{128, 512, 2048}, {0}, {4 * kMiB}, {1}, {0}, {0, 1}})
    ->ArgsProduct({{8192}, {0}, {4 * kMiB}, {1}, {0}, {0, 1}})
    ->ArgsProduct({{128, 512, 2048}, {1}, {1024 * kMiB}, {0}, {0, 1}, {1}})
    ->ArgsProduct({{128, 512, 2048}, {2}, {1024 * kMiB}, {0}, {0}, {1}})
    ->ArgsProduct({{128, 512, 2048}, {2}, {1024 * kMiB}, {1}, {0}, {0, 1}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// The yardstick for the per-event cost: a bare discrete-event simulation of the same
// graph with a hand-written 4-ary heap and nothing else (not the engine's EventQueue: the
// yardstick shares none of the simulator's code). Every op takes a fixed time (a
// transfer: its link preset's latency plus its bytes over that preset's bandwidth, as if
// alone on its links; a compute op: its duration) and is two events, as a flow is in the
// simulator: its start, once its last dependency has ended, and its end. No streams, no
// network, no memory, no records: what is left is the heap and the dependency counts, the
// least any event-driven simulator of this graph pays. ns/event beside BM_AllReduce's on
// the same graph (whose events are its flows' starts and ends) is the ratio the tree
// target (<= 10x a bare heap DES per event) is about; so is the time per op.
class BareHeap {
 public:
  struct Item {
    int64_t time;
    uint32_t op;
  };
  bool empty() const { return h_.empty(); }
  void push(Item it) {
    h_.push_back(it);
    size_t i = h_.size() - 1;
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!less(h_[i], h_[parent])) break;
      std::swap(h_[i], h_[parent]);
      i = parent;
    }
  }
  Item pop() {
    const Item top = h_.front();
    h_.front() = h_.back();
    h_.pop_back();
    size_t i = 0;
    for (;;) {
      size_t best = i;
      for (size_t c = 4 * i + 1; c < std::min(4 * i + 5, h_.size()); ++c) {
        if (less(h_[c], h_[best])) best = c;
      }
      if (best == i) break;
      std::swap(h_[i], h_[best]);
      i = best;
    }
    return top;
  }

 private:
  static bool less(const Item& a, const Item& b) {
    return a.time != b.time ? a.time < b.time : a.op < b.op;
  }
  std::vector<Item> h_;
};

// range(0): GPUs; range(1): algorithm; range(2): bytes (the graph BM_AllReduce expands).
void BM_BareHeapDes(benchmark::State& state) {
  const Cluster c = cluster_of(static_cast<int>(state.range(0)));
  std::vector<CollectiveMember> members;
  for (int d = 0; d < c.num_devices(); ++d)
    members.push_back({d, c.device(d).node, {}, UINT32_MAX});
  TaskGraphBuilder b(c.num_devices());
  add_allreduce(b, static_cast<AllReduceAlgo>(state.range(1)), members, state.range(2), {0, 0});
  const TaskGraph g = std::move(b).build();
  // Each op's fixed time: across nodes the inter-node port, within a node the intra-node
  // link (the same figures the simulation's routes start from).
  const LinkSpec& ib = *find_link_preset("ib-ndr");
  const LinkSpec& nv = *find_link_preset("nvswitch");
  std::vector<int64_t> took(g.size());
  for (OpId i = 0; i < g.size(); ++i) {
    const Op& op = g.op(i);
    if (op.peer < 0) {
      took[i] = op.duration.ps_count();
      continue;
    }
    const LinkSpec& l = c.device(op.device).node == c.device(op.peer).node ? nv : ib;
    took[i] = l.latency.ps_count() + static_cast<int64_t>(static_cast<double>(op.bytes) /
                                                    l.bytes_per_s * 1e12);
  }
  std::vector<uint32_t> waiting(g.size());
  double events = 0;
  int64_t makespan = 0;
  // An item's op carries its kind in the top bit: set for a start, clear for an end.
  constexpr uint32_t kStart = 1u << 31;
  for (auto _ : state) {
    BareHeap heap;
    for (OpId i = 0; i < g.size(); ++i) {
      waiting[i] = static_cast<uint32_t>(g.deps(i).size());
      if (waiting[i] == 0) heap.push({0, i | kStart});
    }
    events = 0;
    while (!heap.empty()) {
      const BareHeap::Item e = heap.pop();
      ++events;
      makespan = e.time;
      const OpId op = e.op & ~kStart;
      if ((e.op & kStart) != 0) {
        heap.push({e.time + took[op], op});
        continue;
      }
      for (OpId s : g.successors(op)) {
        if (--waiting[s] == 0) heap.push({e.time, s | kStart});
      }
    }
    benchmark::DoNotOptimize(makespan);
  }
  state.counters["ops"] = static_cast<double>(g.size());
  state.counters["events"] = events;
  state.counters["ns/event"] = benchmark::Counter(
      events * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["simulated_ms"] = static_cast<double>(makespan) * 1e-9;
}
BENCHMARK(BM_BareHeapDes)
    ->Args({2048, 1, 1024 * kMiB})
    ->Args({2048, 0, 4 * kMiB})
    ->Unit(benchmark::kMillisecond);

// range(0): stages; range(1): micro-batches; range(2): data-parallel copies; range(3): compact
// rings; range(4): SimOptions::fold; range(5): NICs per node (8: one per GPU, as DGX H100,
// so each stage's gradient ring has a rail of its own). One DAPPLE iteration with ring
// gradient all-reduce between the copies of each stage.
void BM_PipelineData(benchmark::State& state) {
  const auto S = state.range(0), M = state.range(1), D = state.range(2);
  const std::string yaml = pipeline_data_yaml(S, M, D, state.range(5));
  const Scenario sc = load_scenario_text(yaml, "bench.yaml");
  Run run;
  for (auto _ : state) {
    // Folded: copies left implicit where they fold, as `pipesim run` builds them.
    const bool fold = state.range(4) != 0;
    const TaskGraph g =
        fold && state.range(3) != 0 ? folded_task_graph(sc) : scenario_task_graph(sc, state.range(3) != 0);
    SimOptions o;
    o.fold = fold;
    run.note(g, simulate(g, sc.cluster, o));
  }
  run.report(state);
}
BENCHMARK(BM_PipelineData)
    ->Args({8, 128, 16, 0, 1, 1})
    ->Args({8, 128, 128, 0, 1, 1})
    ->Args({8, 128, 128, 1, 0, 1})
    ->Args({8, 128, 128, 1, 1, 1})
    // 2048 -> 8192 GPUs at the same work per GPU, one NIC per GPU.
    ->ArgsProduct({{8}, {64}, {8, 256, 1024}, {1}, {0, 1}, {8}})
    ->Args({64, 1024, 8, 0, 1, 1})
    ->Args({64, 1024, 64, 0, 1, 1})
    ->Args({64, 1024, 64, 1, 0, 1})
    ->Args({64, 1024, 64, 1, 1, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipesim
