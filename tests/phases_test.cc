// Collectives in phases (SimOptions::fold): a compact ring whose members are symmetric runs
// as one timer for all its members and steps while no other flow touches its links, and
// turns back into steps the moment one does. Either way the run is the step-by-step run
// to the picosecond: every op, every link's bytes, busy time and peak flows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "schedules/collectives.h"
#include "schedules/collectives_rs_ag.h"
#include "sim/engine.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

Timeline run(const TaskGraph& g, const Cluster& c, bool fold) {
  SimOptions o;
  o.fold = fold;
  return simulate(g, c, o);
}

// Every op at the same picosecond, and the same statistics per link and device.
// `tolerance`: how far each time may move (zero: identical).
void expect_identical(const Timeline& steps, const Timeline& phases,
                      Time tolerance = Time::zero()) {
  const auto near = [&](Time a, Time b) { return max(a, b) - min(a, b) <= tolerance; };
  EXPECT_TRUE(near(steps.makespan, phases.makespan))
      << steps.makespan.ps_count() << " vs " << phases.makespan.ps_count();
  ASSERT_EQ(steps.start.size(), phases.start.size());
  for (size_t i = 0; i < steps.start.size(); ++i) {
    EXPECT_TRUE(near(steps.start[i], phases.start[i]))
        << "op " << i << ": " << steps.start[i].ps_count() << " vs " << phases.start[i].ps_count();
    EXPECT_TRUE(near(steps.end[i], phases.end[i]))
        << "op " << i << ": " << steps.end[i].ps_count() << " vs " << phases.end[i].ps_count();
  }
  ASSERT_EQ(steps.links.size(), phases.links.size());
  for (size_t l = 0; l < steps.links.size(); ++l) {
    EXPECT_EQ(steps.links[l].bytes, phases.links[l].bytes) << "link " << l;
    // A link's busy time adds up to one moved time per flow it carried.
    EXPECT_LE(max(steps.links[l].busy, phases.links[l].busy) -
                  min(steps.links[l].busy, phases.links[l].busy),
              tolerance * 64)
        << "link " << l;
    EXPECT_EQ(steps.links[l].peak_flows, phases.links[l].peak_flows) << "link " << l;
  }
  for (size_t d = 0; d < steps.devices.size(); ++d) {
    EXPECT_EQ(steps.devices[d].busy, phases.devices[d].busy);
    EXPECT_EQ(steps.devices[d].peak_memory, phases.devices[d].peak_memory);
  }
}

Cluster cluster(int nodes, int per_node, const char* intra = "nvswitch") {
  return ClusterBuilder::shorthand(nodes, per_node, *find_gpu_preset("h100-80gb"),
                                   *find_link_preset(intra), *find_link_preset("ib-ndr"));
}

enum class Kind { kRing, kHierarchical, kReduceScatter, kAllGather };

// One collective over `devices`, each member ready after a compute op of `ready_us[i]`
// (one value: all alike), then a compute op on every member after its result.
TaskGraph collective(const Cluster& c, const std::vector<int>& devices, Kind kind, int64_t bytes,
                     const std::vector<int>& ready_us = {100}) {
  TaskGraphBuilder b(c.num_devices());
  b.set_compact_rings(true);
  std::vector<CollectiveMember> members;
  for (size_t i = 0; i < devices.size(); ++i) {
    Op op;
    op.device = devices[i];
    op.duration = Time::us(ready_us.size() == 1 ? ready_us[0] : ready_us[i]);
    const OpId ready = b.add(op);
    Op after = op;
    after.duration = Time::us(10);
    const OpId done = b.add(after);
    members.push_back({devices[i], c.device(devices[i]).node, {ready}, done});
  }
  switch (kind) {
    case Kind::kRing:
      add_allreduce(b, AllReduceAlgo::kRing, members, bytes, {0, 0});
      break;
    case Kind::kHierarchical:
      add_allreduce(b, AllReduceAlgo::kHierarchical, members, bytes, {0, 0});
      break;
    case Kind::kReduceScatter:
      add_reduce_scatter(b, members, bytes, {0, 0});
      break;
    case Kind::kAllGather:
      add_all_gather(b, members, bytes, {0, 0});
      break;
  }
  return std::move(b).build();
}

std::vector<int> all_of(const Cluster& c) {
  std::vector<int> v(static_cast<size_t>(c.num_devices()));
  for (int d = 0; d < c.num_devices(); ++d) v[static_cast<size_t>(d)] = d;
  return v;
}

// A ring all-reduce of 64 MiB among the 8 GPUs of one NVSwitch node: every member's step
// crosses its own port up and the next member's port down, one flow each, so every step
// runs at the port's rate. 14 steps of 8 MiB, one timer instead of 112 flows.
TEST(Phases, ARingInsideANodeIsTheStepsToThePicosecond) {
  const Cluster c = cluster(1, 8);
  const TaskGraph g = collective(c, all_of(c), Kind::kRing, 64 << 20);
  const Timeline steps = run(g, c, false), phases = run(g, c, true);
  expect_identical(steps, phases);
  // By hand: 100 us of compute, then 14 x (latency + 8 MiB at the port's rate), then 10 us.
  const Route& r = c.route(0, 1);
  const Time step = r.latency + serialization_time(8 << 20, r.bottleneck_bytes_per_s);
  EXPECT_EQ(phases.makespan, Time::us(110) + 14 * step);
  // Steps: 112 latencies and 112 flow ends; a phase: the decision and its end.
  EXPECT_EQ(steps.events - phases.events, 2 * 112 - 2);
}

// Across nodes, one GPU per node: each step crosses two NICs, one flow on each.
TEST(Phases, SymmetricRingsAcrossNodesAreTheSteps) {
  for (int nodes : {2, 3, 16}) {
    SCOPED_TRACE(nodes);
    const Cluster c = cluster(nodes, 1);
    for (Kind k : {Kind::kRing, Kind::kReduceScatter, Kind::kAllGather}) {
      const TaskGraph g = collective(c, all_of(c), k, 12345678);
      const Timeline steps = run(g, c, false), phases = run(g, c, true);
      expect_identical(steps, phases);
      // Step by step every member's every step is a latency and a flow end (each flow
      // alone on its links, so never re-projected): 2 S n events for S steps; the phase is
      // its decision and its end. S = 2(n - 1) for the all-reduce, n - 1 for the others.
      const int64_t n = nodes, s = k == Kind::kRing ? 2 * (n - 1) : n - 1;
      EXPECT_EQ(static_cast<int64_t>(steps.events - phases.events), 2 * s * n - 2);
    }
  }
}

// A hierarchical all-reduce over 4 nodes of 8: the rings inside the nodes run as phases;
// the eight rail rings across them are each symmetric but share each node's one NIC, so
// the first one's phase turns into steps when the second one's steps start.
TEST(Phases, AHierarchicalAllReduceIsTheSteps) {
  const Cluster c = cluster(4, 8);
  const TaskGraph g = collective(c, all_of(c), Kind::kHierarchical, 256 << 20);
  const Timeline steps = run(g, c, false), phases = run(g, c, true);
  expect_identical(steps, phases);
  // The 8 rings inside the nodes (a reduce-scatter and an all-gather on each of 4 nodes,
  // 7 steps of 8 members) save 2 x 7 x 8 - 2 events each; the rail rings cost at most
  // their 8 decisions.
  EXPECT_GE(static_cast<int64_t>(steps.events - phases.events), 8 * (2 * 7 * 8 - 2) - 8);
}

// A flat ring over nodes of 8 GPUs is not symmetric (7 of every 8 hops inside a node, one
// across) but periodic: folded to its first 8 members, member 7 sending to member 8's GPU
// and member 0 receiving member 7's chunks as its image would. 4 nodes: 62 steps of 2 MiB.
TEST(Phases, AFlatRingOverNodesFoldsByItsPeriod) {
  for (int nodes : {2, 4, 16}) {
    SCOPED_TRACE(nodes);
    const Cluster c = cluster(nodes, 8);
    for (Kind k : {Kind::kRing, Kind::kReduceScatter, Kind::kAllGather}) {
      const TaskGraph g = collective(c, all_of(c), k, int64_t{nodes} * 8 * (2 << 20));
      const Timeline steps = run(g, c, false), folded = run(g, c, true);
      expect_identical(steps, folded);
      // As above, 2 S n events step by step; folded, the period's 8 members' 2 S 8 and the
      // decision.
      const int64_t n = nodes * 8, s = k == Kind::kRing ? 2 * (n - 1) : n - 1;
      EXPECT_EQ(static_cast<int64_t>(steps.events - folded.events), 2 * s * (n - 8) - 1);
    }
  }
}

// Rings neither symmetric nor periodic run step by step, event for event: a ring over
// GPUs 0 and 1 of node 0 and GPU 0 of nodes 1 and 2 (one hop inside a node, three across),
// and a symmetric ring whose members become ready at different times.
TEST(Phases, AsymmetricRingsRunStepByStep) {
  const Cluster three = cluster(3, 4);
  const TaskGraph g = collective(three, {0, 1, 4, 8}, Kind::kRing, 64 << 20);
  Timeline steps = run(g, three, false), phases = run(g, three, true);
  expect_identical(steps, phases);
  EXPECT_EQ(steps.events, phases.events);

  const Cluster one = cluster(1, 4);
  const TaskGraph staggered =
      collective(one, all_of(one), Kind::kRing, 64 << 20, {100, 100, 130, 100});
  steps = run(staggered, one, false);
  phases = run(staggered, one, true);
  expect_identical(steps, phases);
  EXPECT_EQ(steps.events + 1, phases.events);  // the decision that it runs step by step
}

// With no latency between steps a member's next step starts in the very moment its last
// one ends, while that one is still on the link: step by step a link counts two flows
// there, so such rings are never phases or folds (pipelines of test::PipeSpec, whose
// links have no latency, with data-parallel rings among 4 and 8 copies).
TEST(Phases, RingsWithoutLatencyRunStepByStep) {
  for (int data : {4, 8}) {
    test::PipeSpec p;
    p.stages = 2;
    p.data = data;
    p.params = "10M";
    const Scenario sc = load_scenario_text(test::to_yaml(p), "zero.yaml");
    const TaskGraph g = scenario_task_graph(sc, true);
    ASSERT_FALSE(g.rings().empty());
    const Timeline steps = run(g, sc.cluster, false), phases = run(g, sc.cluster, true);
    expect_identical(steps, phases);
    EXPECT_EQ(steps.events, phases.events);
  }
}

// Whole scenarios whose gradient rings are symmetric and alone on their links: ZeRO-1/2/3
// reduce-scatters and all-gathers among 8 GPUs of a node, data parallelism over 4 nodes.
TEST(Phases, ScenariosWithSymmetricRingsAreTheSteps) {
  const std::vector<std::string> yamls = {
      R"(cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 8, intra_node: nvswitch}
model: {layers: [{name: l, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, params: 3M, repeat: 4}]}
training: {global_batch: 16, micro_batch: 1, precision: mixed, optimizer: adam, iterations: 2}
strategy: {schedule: dapple, pipeline: 1, data: 8, allreduce: ring, zero: 1}
)",
      R"(cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 8, intra_node: nvswitch}
model: {layers: [{name: l, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, params: 3M, repeat: 4}]}
training: {global_batch: 16, micro_batch: 1, precision: mixed, optimizer: adam}
strategy: {schedule: dapple, pipeline: 1, data: 8, allreduce: ring, zero: 3}
)",
      R"(cluster: {gpu: h100-80gb, nodes: 4, gpus_per_node: 1, intra_node: nvswitch, inter_node: ib-ndr}
model: {layers: [{name: l, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, params: 30M, repeat: 4}]}
training: {global_batch: 16, micro_batch: 1}
strategy: {schedule: dapple, pipeline: 1, data: 4, allreduce: ring}
)"};
  for (const std::string& yaml : yamls) {
    SCOPED_TRACE(yaml);
    const Scenario sc = load_scenario_text(yaml, "phases.yaml");
    const TaskGraph g = scenario_task_graph(sc, true);
    ASSERT_FALSE(g.rings().empty());
    const Timeline steps = run(g, sc.cluster, false), phases = run(g, sc.cluster, true);
    expect_identical(steps, phases);
    EXPECT_LT(phases.events, steps.events);
  }
}

// Phases and folds among unrelated traffic: rings over every GPU of all nodes but the last
// (symmetric where each node has one GPU or one node holds them all, periodic otherwise)
// while a GPU of the last node sends transfers to random members at random moments, so
// phases and folds start, are cut short by a transfer and go on as steps, or are refused
// because a transfer is already on their links. Every op starts and ends at the
// step-by-step run's picosecond.
constexpr int64_t kSplitTolerancePs = 4;

TEST(Phases, AmongOtherTrafficTheyAreTheSteps) {
  const GpuSpec gpu = *find_gpu_preset("h100-80gb");
  std::mt19937 rng(7);
  int folded = 0, cases = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    const int nodes = 1 + static_cast<int>(seed % 5), per_node = 1 + static_cast<int>(seed % 4);
    const int ring = nodes * per_node, spare = ring;
    if (ring < 2) continue;
    const Cluster c = ClusterBuilder::shorthand(
        nodes + 1, per_node, gpu, *find_link_preset("nvswitch"), *find_link_preset("ib-ndr"));
    TaskGraphBuilder b(c.num_devices());
    b.set_compact_rings(true);
    std::vector<OpId> last(static_cast<size_t>(c.num_devices()));
    auto compute = [&](int d, int us) {
      Op op;
      op.device = d;
      op.duration = Time::us(us);
      return last[static_cast<size_t>(d)] = b.add(op);
    };
    for (int d = 0; d < ring; ++d) compute(d, 50);
    for (int k = 0; k < 12; ++k) {
      const OpId x =
          b.add(transfer_op(spare, static_cast<int>(rng() % static_cast<uint32_t>(ring)),
                            int64_t{1} << (16 + rng() % 10), CommKind::kActivation, 0, 0, 0));
      b.add_dep(x, compute(spare, 1 + static_cast<int>(rng() % 300)));
    }
    for (int round = 0; round < 4; ++round) {
      std::vector<CollectiveMember> members;
      for (int d = 0; d < ring; ++d)
        members.push_back({d, c.device(d).node, {last[static_cast<size_t>(d)]}, UINT32_MAX});
      for (CollectiveMember& m : members) m.done = compute(m.device, 50);
      add_allreduce(b, round % 2 ? AllReduceAlgo::kHierarchical : AllReduceAlgo::kRing, members,
                    int64_t{1} << (12 + rng() % 14), {round, 0});
    }
    const TaskGraph g = std::move(b).build();
    ASSERT_FALSE(g.validate().has_value());
    SCOPED_TRACE(fmt::format("seed {}: {} x {}", seed, nodes, per_node));
    const Timeline steps = run(g, c, false), phases = run(g, c, true);
    // Where a phase is split by other traffic, its flows join the network with the bytes
    // left that its rate gives, while the steps' flows were brought up to date event by
    // event: the same values to the last bit or two of a double, so a projection may move
    // by a picosecond or two, and the ops after it with it (which last bit depends on the
    // compiler's code). Bound: 10^-8 of the makespan (10 ps per millisecond).
    expect_identical(steps, phases,
                     max(Time::ps(kSplitTolerancePs),
                         Time::ps(steps.makespan.ps_count() / 100'000'000)));
    folded += phases.events < steps.events ? 1 : 0;
    ++cases;
  }
  EXPECT_GT(folded, 10);
  std::printf("%d of %d graphs ran fewer events\n", folded, cases);
}

}  // namespace
}  // namespace pipesim
