// Identical data-parallel copies simulated once (SimOptions::fold, sim/copies.h): where the
// copies are the same ops on links that are images of each other, copy 0 alone runs and the
// others take its figures; the run is the full run's to the picosecond (every op's start
// and end, every device's and link's statistics, the out-of-memory device). Where anything
// breaks the symmetry (a straggler, a slower link, a collective that does not rotate with
// the copies) every copy is simulated.
#include "sim/copies.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/error.h"
#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "schedules/lower.h"
#include "sim/engine.h"
#include "tests/copies_support.h"

namespace pipesim {
namespace {

using namespace test;

TEST(Copies, PipelineByDataFoldsToTheFullRun) {
  // 4 stages x 8 copies over 4 nodes, a NIC per GPU: two copies to a node, so the gradient
  // ring's step from copy 0 to copy 1 stays inside the node and the one from copy 1 to copy
  // 2 crosses the fabric. Moving one copy on is no symmetry, moving two (a node) is: four
  // copies of two.
  const Pair p = both(scenario(4, "{preset: ib-ndr, nics: 8}",
                               "{schedule: dapple, pipeline: 4, data: 8, allreduce: ring}"));
  EXPECT_EQ(p.folded.folded_copies, 4);
  expect_identical(p.full, p.folded);
  EXPECT_LE(p.folded.events * 4, p.full.events);
}

TEST(Copies, CopiesMovingAsWholeNodesFoldAsRouteByRoute) {
  // 8 stages x 4 copies, a node each, on 5 nodes of interchangeable nodes (one fabric
  // switch, a NIC per GPU): the fold moves whole nodes and never composes an image's route
  // (Cluster::nodes_interchangeable). A cable of the idle fifth node at half speed makes
  // the nodes unlike, so the same fold is found route by route: the same orbits of every
  // link a flow crosses, shares 1, and both runs are the full run.
  const Scenario sc = load_scenario_text(
      scenario(5, "{preset: ib-ndr, nics: 8}",
               "{schedule: dapple, pipeline: 8, data: 4, allreduce: ring}"),
      "copies.yaml");
  ASSERT_TRUE(sc.cluster.nodes_interchangeable());
  Cluster slowed = sc.cluster;
  slowed.slow_down_link(slowed.node_links(4)[0].first, 0.5);
  ASSERT_FALSE(slowed.nodes_interchangeable());
  const TaskGraph g = scenario_task_graph(sc, true);
  const std::optional<CopyFold> moved = fold_copies(g, sc.cluster);
  const std::optional<CopyFold> routed = fold_copies(g, slowed);
  ASSERT_TRUE(moved && routed);
  EXPECT_EQ(moved->copies, 4);
  EXPECT_EQ(routed->copies, 4);
  size_t crossed = 0;
  for (size_t h = 0; h < routed->rep.size(); ++h) {
    if (routed->rep[h] < 0) continue;  // no flow crosses it
    ++crossed;
    EXPECT_EQ(moved->rep[h], routed->rep[h]) << h;
    const auto l = static_cast<LinkDirection>(h);
    EXPECT_EQ(moved->share_of(l), routed->share_of(l)) << h;
  }
  EXPECT_GT(crossed, 0u);
  // Both number the orbits in the order of their representatives (the engine's tables
  // follow it): a move of whole nodes as it finds them (number_orbits), the route-by-route
  // fold from the representatives afterwards.
  for (const CopyFold* f : {&*moved, &*routed}) {
    ASSERT_EQ(f->orbit.size(), f->rep.size());
    EXPECT_TRUE(std::is_sorted(f->orbit_rep.begin(), f->orbit_rep.end()));
    for (size_t o = 0; o < f->orbit_rep.size(); ++o) {
      const auto r = static_cast<size_t>(f->orbit_rep[o]);
      EXPECT_EQ(f->rep[r], f->orbit_rep[o]) << o;
      EXPECT_EQ(f->orbit[r], static_cast<int32_t>(o)) << o;
    }
    for (size_t h = 0; h < f->rep.size(); ++h) {
      const int32_t want = f->rep[h] < 0 ? -1 : f->orbit[static_cast<size_t>(f->rep[h])];
      EXPECT_EQ(f->orbit[h], want) << h;
    }
  }
  SimOptions off;
  off.fold = false;
  const Timeline full = simulate(g, sc.cluster, off);
  expect_identical(full, simulate(g, sc.cluster));
  Timeline on_slowed = simulate(g, slowed);
  EXPECT_EQ(on_slowed.folded_copies, 4);
  expect_identical(full, on_slowed);
}

// A trace's run (memory changes and link samples recorded; ring collectives compact, one op
// per member as an NCCL kernel shows in a profile) folds too: copy 0's changes stand for their images', at the same moments, and a
// representative link's samples for its orbit's, at share times copy 0's load. Per device
// the memory changes are the full run's, in its order; per link and moment the last
// sample's utilisation is the full run's.
TEST(Copies, RecordedRunsFoldToTheFullRun) {
  const Scenario sc = load_scenario_text(
      scenario(4, "{preset: ib-ndr, nics: 8}",
               "{schedule: dapple, pipeline: 4, data: 8, allreduce: ring}"),
      "copies.yaml");
  const TaskGraph g = scenario_task_graph(sc, true);
  SimOptions o;
  o.record_memory = o.record_links = true;
  SimOptions off = o;
  off.fold = false;
  const Timeline full = simulate(g, sc.cluster, off), folded = simulate(g, sc.cluster, o);
  EXPECT_EQ(folded.folded_copies, 4);
  expect_identical(full, folded);
  const auto per_device = [&](const Timeline& tl) {
    std::vector<std::vector<std::tuple<int64_t, OpId, bool>>> out(
        static_cast<size_t>(sc.cluster.num_devices()));
    for (const MemoryChange& c : tl.memory_changes)
      out[static_cast<size_t>(g.op(c.op).device)].emplace_back(c.time.ps_count(), c.op, c.at_end);
    return out;
  };
  EXPECT_EQ(per_device(folded), per_device(full));
  const auto last = [](const Timeline& tl) {
    std::map<std::pair<LinkDirection, int64_t>, float> out;
    for (const LinkSample& s : tl.link_samples) out[{s.link, s.time.ps_count()}] = s.utilisation;
    return out;
  };
  const auto a = last(full), b = last(folded);
  ASSERT_EQ(a.size(), b.size());
  size_t wrong = 0;
  for (const auto& [key, u] : a) {
    const auto it = b.find(key);
    wrong += it == b.end() || std::abs(it->second - u) > 1e-5f;
  }
  EXPECT_EQ(wrong, 0u) << "link samples that differ";
}

TEST(Copies, TensorPipelineDataWithOneNicPerNode) {
  // TP 2 x PP 2 x DP 8 on 4 nodes sharing one NIC per node: two copies per node, so moving
  // one copy on does not map a node's NIC onto one node's NIC: simulated in full, or
  // folded where the links do map; the same run either way.
  const Pair p = both(scenario(4, "ib-ndr",
                               "{schedule: 1f1b, pipeline: 2, tensor: 2, data: 8, allreduce: ring}"));
  expect_identical(p.full, p.folded);
}

TEST(Copies, InterleavedWithZeroAndTensorParallelism) {
  const Pair p =
      both(scenario(8, "{preset: ib-ndr, nics: 8}",
                    "{schedule: interleaved, virtual_stages: 2, pipeline: 2, tensor: 4, data: 8, "
                    "zero: 1, allreduce: ring}"));
  EXPECT_EQ(p.folded.folded_copies, 8);
  expect_identical(p.full, p.folded);
}

TEST(Copies, DataParallelAcrossNodes) {
  // One copy per node (TP 8): the gradient ring crosses every node's NIC.
  const Pair p = both(scenario(
      4, "ib-ndr", "{schedule: dapple, pipeline: 1, tensor: 8, data: 4, allreduce: ring}", 4));
  EXPECT_EQ(p.folded.folded_copies, 4);
  expect_identical(p.full, p.folded);
}

TEST(Copies, CommunicationSlowingComputeFoldsToTheFullRun) {
  // comm_interference re-times compute whenever a GPU's sends start or end: the copies
  // stay images of each other (each GPU counts its own sends), so the fold holds.
  const Pair p = both(scenario(
      8, "{preset: ib-ndr, nics: 8}",
      "{schedule: interleaved, virtual_stages: 2, pipeline: 2, tensor: 4, data: 8, zero: 1, "
      "allreduce: ring, tensor_overlap: backward, sequence_parallel: true}",
      8, "", "{preset: h100-80gb, comm_interference: 0.25}"));
  EXPECT_EQ(p.folded.folded_copies, 8);
  expect_identical(p.full, p.folded);
  // Slowed: longer than the same run without the share.
  const Pair plain =
      both(scenario(8, "{preset: ib-ndr, nics: 8}",
                    "{schedule: interleaved, virtual_stages: 2, pipeline: 2, tensor: 4, data: 8, "
                    "zero: 1, allreduce: ring, tensor_overlap: backward, sequence_parallel: true}",
                    8, "", "{preset: h100-80gb, comm_interference: 0}"));
  EXPECT_GT(p.full.makespan, plain.full.makespan);
  EXPECT_GT(p.full.devices[0].busy, plain.full.devices[0].busy);
}

TEST(Copies, OutOfMemoryOnTheLowestDevice) {
  // A model too large for its GPUs: every copy crosses capacity at the same moment; the
  // report names the lowest device, as the full run does.
  const Pair p = both(scenario(2, "{preset: ib-ndr, nics: 8}",
                               "{schedule: gpipe, pipeline: 2, data: 8, allreduce: ring}", 48, "",
                               "v100-16gb"));
  ASSERT_TRUE(p.full.oom.oom);
  EXPECT_EQ(p.folded.folded_copies, 2);  // four copies to a node
  expect_identical(p.full, p.folded);
}

TEST(Copies, AStragglerIsSimulatedInFull) {
  const Pair p = both(scenario(2, "{preset: ib-ndr, nics: 8}",
                               "{schedule: dapple, pipeline: 2, data: 8, allreduce: ring}", 8,
                               "  slowdown: [{device: node0/gpu5, compute: 1.5}]\n"));
  EXPECT_EQ(p.folded.folded_copies, 1);
  expect_identical(p.full, p.folded);
}

TEST(Copies, TreeAllReduceIsSimulatedInFull) {
  // A tree's sends do not rotate with the copies.
  const Pair p = both(scenario(2, "{preset: ib-ndr, nics: 8}",
                               "{schedule: dapple, pipeline: 2, data: 8, allreduce: tree}"));
  EXPECT_EQ(p.folded.folded_copies, 1);
  expect_identical(p.full, p.folded);
}

// The report of the graph with copies left implicit (folded_task_graph) against the full
// graph's run step by step, every field but the event count.

// Random strategies on small clusters: folded or not, the full run's figures.
TEST(Copies, RandomStrategiesAgreeWithTheFullRun) {
  std::mt19937 rng(29);
  const char* schedules[] = {"gpipe", "dapple", "1f1b", "interleaved", "zb-h1"};
  const char* inters[] = {"ib-ndr", "{{preset: ib-ndr, nics: {}}}", "{{preset: ib-ndr, nics: 2}}"};
  int folded = 0, implicit = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int pp = 1 << (rng() % 3), tp = 1 << (rng() % 3), dp = 2 << (rng() % 3);
    const int gpus = pp * tp * dp;
    const int nodes = std::max(1, gpus / 8);
    if (nodes * 8 != gpus && gpus > 8) continue;
    const int per_node = std::min(gpus, 8);
    std::string sched = schedules[rng() % 5];
    if (pp == 1) sched = "dapple";
    std::string strategy = fmt::format(
        "{{schedule: {}, pipeline: {}, tensor: {}, data: {}, zero: {}, allreduce: ring{}}}", sched,
        pp, tp, dp, rng() % 3, sched == "interleaved" ? ", virtual_stages: 2" : "");
    SCOPED_TRACE(strategy);
    const std::string inter = fmt::format(fmt::runtime(inters[rng() % 3]), per_node);
    const std::string yaml = small_run(gpus, inter, "sequence: 512", dp * 4, strategy);
    const Pair p = both(yaml);
    folded += p.folded.folded_copies > 1;
    expect_identical(p.full, p.folded);
    const Reports r = reports(yaml);  // copies left implicit where they fold
    implicit += r.built < r.copies;
    EXPECT_EQ(r.implicit, r.full);
  }
  EXPECT_GT(folded, 4);
  EXPECT_GT(implicit, 4);
}

}  // namespace
}  // namespace pipesim
