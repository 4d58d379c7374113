// Compact ring collectives (CompactRing) against their expansion into one transfer per step
// and member: the engine runs the same flows in the same order, so every non-collective op
// starts and ends at the same picosecond, and makespan, event count, link and device
// statistics are identical. Step by step (SimOptions::fold off); phases_test.cc checks the
// phases against these steps.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "schedules/collectives_rs_ag.h"
#include "sim/engine.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

// Compares the runs of the same construction, expanded (`e`) and compact (`c`).
void expect_same(const TaskGraph& ge, const Timeline& e, const TaskGraph& gc, const Timeline& c) {
  ASSERT_FALSE(gc.rings().empty());
  EXPECT_LT(gc.size(), ge.size());
  EXPECT_EQ(e.makespan, c.makespan);
  EXPECT_EQ(e.events, c.events);
  ASSERT_EQ(e.links.size(), c.links.size());
  for (size_t l = 0; l < e.links.size(); ++l) {
    EXPECT_EQ(e.links[l].bytes, c.links[l].bytes) << "link " << l;
    EXPECT_EQ(e.links[l].busy, c.links[l].busy) << "link " << l;
    EXPECT_EQ(e.links[l].peak_flows, c.links[l].peak_flows) << "link " << l;
  }
  ASSERT_EQ(e.devices.size(), c.devices.size());
  for (size_t d = 0; d < e.devices.size(); ++d) {
    EXPECT_EQ(e.devices[d].busy, c.devices[d].busy);
    EXPECT_EQ(e.devices[d].peak_memory, c.devices[d].peak_memory);
    EXPECT_EQ(e.devices[d].peak_time, c.devices[d].peak_time);
    EXPECT_EQ(e.devices[d].ops, c.devices[d].ops);
  }
  EXPECT_EQ(e.link_samples.size(), c.link_samples.size());
  // Non-collective ops come in the same order in both graphs.
  std::vector<OpId> a, b;
  for (OpId id = 0; id < ge.size(); ++id)
    if (!is_collective(ge.op(id).comm)) a.push_back(id);
  for (OpId id = 0; id < gc.size(); ++id)
    if (!is_collective(gc.op(id).comm)) b.push_back(id);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(ge.op(a[i]).kind, gc.op(b[i]).kind);
    EXPECT_EQ(e.start[a[i]], c.start[b[i]]) << ge.describe(a[i]);
    EXPECT_EQ(e.end[a[i]], c.end[b[i]]) << ge.describe(a[i]);
  }
}

// Compute ops on every device, pipeline transfers between random pairs, and collectives
// (ring, hierarchical and tree all-reduces, reduce-scatters, all-gathers) among random
// groups in random order, waiting on compute ops and on each other.
TaskGraph random_graph(const Cluster& cl, uint32_t seed, bool compact) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const int D = cl.num_devices();
  TaskGraphBuilder b(D);
  b.set_compact_rings(compact);
  std::vector<OpId> last(static_cast<size_t>(D), UINT32_MAX);
  auto compute = [&](int d) {
    Op op;
    op.kind = OpKind::kForward;
    op.device = d;
    op.duration = Time::us(1 + pick(400));
    op.mem_at_start = 1000 * (1 + pick(10));
    op.mem_at_end = -op.mem_at_start;
    const OpId id = b.add(op);
    if (last[static_cast<size_t>(d)] != UINT32_MAX && pick(2) == 0)
      b.add_dep(id, last[static_cast<size_t>(d)]);
    last[static_cast<size_t>(d)] = id;
    return id;
  };
  for (int d = 0; d < D; ++d) compute(d);
  for (int round = 0; round < 6; ++round) {
    for (int k = 0; k < 1 + pick(D); ++k) {
      const int s = pick(D), t = pick(D);
      if (s == t) continue;
      const OpId x = b.add(transfer_op(s, t, 1 << (10 + pick(14)), CommKind::kActivation, 0, 0, 0));
      b.add_dep(x, last[static_cast<size_t>(s)]);
      const OpId y = compute(t);
      b.add_dep(y, x);
    }
    std::vector<int> group(static_cast<size_t>(D));
    for (int d = 0; d < D; ++d) group[static_cast<size_t>(d)] = d;
    std::shuffle(group.begin(), group.end(), rng);
    group.resize(static_cast<size_t>(2 + pick(D - 1)));
    std::vector<CollectiveMember> members;
    for (int d : group) {
      CollectiveMember m{d, cl.device(d).node, {last[static_cast<size_t>(d)]}, UINT32_MAX};
      if (pick(4) == 0) m.ready.push_back(UINT32_MAX);
      if (pick(4) == 0) m.ready.clear();
      members.push_back(m);
    }
    for (CollectiveMember& m : members) {
      if (pick(3) != 0) m.done = compute(m.device);
    }
    const int64_t bytes = int64_t{1} << (8 + pick(18));
    std::vector<std::vector<OpId>> out;
    switch (pick(5)) {
      case 0:
        out = add_allreduce(b, AllReduceAlgo::kRing, members, bytes, {round, 0});
        break;
      case 1:
        out = add_allreduce(b, AllReduceAlgo::kHierarchical, members, bytes, {round, 0});
        break;
      case 2:
        out = add_allreduce(b, AllReduceAlgo::kTree, members, bytes, {round, 0});
        break;
      case 3:
        out = add_reduce_scatter(b, members, bytes, {round, 0});
        break;
      default:
        out = add_all_gather(b, members, bytes, {round, 0});
        break;
    }
    // Something else waits on one member's result.
    const size_t i = static_cast<size_t>(pick(static_cast<int>(members.size())));
    const OpId after = compute(members[i].device);
    for (OpId d : out[i]) {
      if (d != UINT32_MAX) b.add_dep(after, d);
    }
  }
  return std::move(b).build();
}

// (Without comm_interference: a compact member counts as sending from its first send to
// its last receive, steps in between included, where the expansion counts each step.)
TEST(CompactRings, RandomGraphsRunExactlyAsTheirExpansion) {
  GpuSpec gpu = *find_gpu_preset("h100-80gb");
  gpu.comm_interference = 0;
  int compared = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    const int nodes = 1 + static_cast<int>(seed % 3), per_node = 1 + static_cast<int>(seed % 4);
    if (nodes * per_node < 2) continue;
    const Cluster cl = ClusterBuilder::shorthand(nodes, per_node, gpu, *find_link_preset("nvlink3"),
                                                 *find_link_preset("ib-ndr"));
    const TaskGraph ge = random_graph(cl, seed, false), gc = random_graph(cl, seed, true);
    ASSERT_FALSE(ge.validate().has_value()) << *ge.validate();
    ASSERT_FALSE(gc.validate().has_value()) << *gc.validate();
    if (gc.rings().empty()) continue;
    SCOPED_TRACE(fmt::format("seed {}", seed));
    for (bool links : {false, true}) {
      SimOptions o;
      o.fold = false;
      o.record_links = links;
      o.record_memory = links;
      expect_same(ge, simulate(ge, cl, o), gc, simulate(gc, cl, o));
    }
    ++compared;
  }
  EXPECT_GT(compared, 30);
}

// Members join a ring at different times in these graphs. Step by step, chunks pass a
// member that has not joined, but its part of the collective ends no earlier than its
// op starts: on GPUs whose compute slows while they send (comm_interference), where the
// engine counts each member's transfer from its start to its end, every op ends after it
// started, step by step, as phases and folded alike.
TEST(CompactRings, NoMemberEndsBeforeItJoins) {
  GpuSpec gpu = *find_gpu_preset("h100-80gb");
  gpu.comm_interference = 0.2;
  int rings = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const int nodes = 1 + static_cast<int>(seed % 3), per_node = 1 + static_cast<int>(seed % 4);
    if (nodes * per_node < 2) continue;
    const Cluster cl = ClusterBuilder::shorthand(nodes, per_node, gpu, *find_link_preset("nvlink3"),
                                                 *find_link_preset("ib-ndr"));
    const TaskGraph g = random_graph(cl, seed, true);
    SCOPED_TRACE(fmt::format("seed {}", seed));
    for (bool fold : {false, true}) {
      SimOptions o;
      o.fold = fold;
      const Timeline t = simulate(g, cl, o);
      for (OpId id = 0; id < g.size(); ++id) {
        ASSERT_NE(t.start[id], Time::max()) << g.describe(id);
        EXPECT_LE(t.start[id], t.end[id]) << g.describe(id);
      }
    }
    rings += static_cast<int>(g.rings().size());
  }
  EXPECT_GT(rings, 30);
}

// Whole scenarios: data-parallel rings (plain and hierarchical) under a pipeline, ZeRO's
// reduce-scatters and all-gathers, sequence parallelism's per-layer rings (without
// comm_interference, as above).
TEST(CompactRings, ScenariosRunExactlyAsTheirExpansion) {
  const std::string pipeline =
      R"(cluster: {gpu: {preset: h100-80gb, comm_interference: 0}, nodes: 2, gpus_per_node: 4, intra_node: nvswitch, inter_node: ib-ndr}
model:
  layers: [{name: block, repeat: 4, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 4 MiB, params: 10M}]
training: {global_batch: 16, micro_batch: 1}
strategy: {schedule: dapple, pipeline: 2, data: 4, allreduce: ALGO}
)";
  const std::string zero =
      R"(cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 4, intra_node: nvswitch2}
model:
  layers:
    - {name: l, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, params: 3M, repeat: 4}
training: {global_batch: 8, micro_batch: 1, precision: mixed, optimizer: adam, iterations: 2}
strategy: {schedule: dapple, pipeline: 1, data: 4, allreduce: ring, zero: STAGE}
)";
  const std::string sp =
      R"(cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 8, intra_node: nvswitch2}
model: {generator: transformer, layers: 4, hidden: 256, heads: 4, sequence: 128, vocab: 1024}
training: {global_batch: 4, micro_batch: 1, precision: mixed, optimizer: adam}
strategy: {schedule: 1f1b, pipeline: 2, tensor: 4, sequence_parallel: true}
)";
  auto with = [](std::string s, const std::string& key, const std::string& value) {
    return s.replace(s.find(key), key.size(), value);
  };
  std::vector<std::string> yamls = {with(pipeline, "ALGO", "ring"),
                                    with(pipeline, "ALGO", "hierarchical"), sp};
  for (const char* stage : {"1", "2", "3"}) yamls.push_back(with(zero, "STAGE", stage));
  for (const std::string& yaml : yamls) {
    SCOPED_TRACE(yaml);
    const Scenario sc = load_scenario_text(yaml, "compact.yaml");
    const TaskGraph ge = scenario_task_graph(sc, false), gc = scenario_task_graph(sc, true);
    SimOptions o;
    o.fold = false;
    expect_same(ge, simulate(ge, sc.cluster, o), gc, simulate(gc, sc.cluster, o));
  }
}

}  // namespace
}  // namespace pipesim
