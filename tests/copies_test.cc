// Identical data-parallel copies simulated once (SimOptions::fold, sim/copies.h): where the
// copies are the same ops on links that are images of each other, copy 0 alone runs and the
// others take its figures; the run is the full run's to the picosecond (every op's start
// and end, every device's and link's statistics, the out-of-memory device). Where anything
// breaks the symmetry (a straggler, a slower link, a collective that does not rotate with
// the copies) every copy is simulated.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "schedules/lower.h"
#include "sim/copies.h"
#include "sim/engine.h"
#include "sim/report.h"

namespace pipesim {
namespace {

struct Pair {
  Timeline full, folded;
};

Pair both(const std::string& yaml) {
  const Scenario sc = load_scenario_text(yaml, "copies.yaml");
  const TaskGraph g = scenario_task_graph(sc, true);
  SimOptions off;
  off.fold = false;
  return {simulate(g, sc.cluster, off), simulate(g, sc.cluster)};
}

void expect_identical(const Timeline& a, const Timeline& b) {
  EXPECT_EQ(a.makespan, b.makespan);
  ASSERT_EQ(a.start.size(), b.start.size());
  size_t wrong = 0;
  for (size_t i = 0; i < a.start.size(); ++i)
    wrong += a.start[i] != b.start[i] || a.end[i] != b.end[i];
  EXPECT_EQ(wrong, 0u) << "ops at another time";
  ASSERT_EQ(a.links.size(), b.links.size());
  for (size_t l = 0; l < a.links.size(); ++l) {
    EXPECT_EQ(a.links[l].bytes, b.links[l].bytes) << "link " << l;
    EXPECT_EQ(a.links[l].busy, b.links[l].busy) << "link " << l;
    EXPECT_EQ(a.links[l].peak_flows, b.links[l].peak_flows) << "link " << l;
  }
  ASSERT_EQ(a.devices.size(), b.devices.size());
  for (size_t d = 0; d < a.devices.size(); ++d) {
    EXPECT_EQ(a.devices[d].busy, b.devices[d].busy) << "device " << d;
    EXPECT_EQ(a.devices[d].peak_memory, b.devices[d].peak_memory) << "device " << d;
    EXPECT_EQ(a.devices[d].peak_time, b.devices[d].peak_time) << "device " << d;
    EXPECT_EQ(a.devices[d].at_peak, b.devices[d].at_peak) << "device " << d;
    EXPECT_EQ(a.devices[d].ops, b.devices[d].ops) << "device " << d;
  }
  EXPECT_EQ(a.oom.oom, b.oom.oom);
  EXPECT_EQ(a.oom.device, b.oom.device);
  EXPECT_EQ(a.oom.op, b.oom.op);
  EXPECT_EQ(a.oom.time, b.oom.time);
  EXPECT_EQ(a.oom.bytes, b.oom.bytes);
}

// A GPT-like model of `layers` generated layers on `nodes` x 8 H100s.
std::string scenario(int nodes, const std::string& inter, const std::string& strategy,
                     int layers = 8, const std::string& extra_cluster = "",
                     const std::string& gpu = "h100-80gb") {
  return fmt::format(R"(cluster:
  gpu: {gpu}
  nodes: {nodes}
  gpus_per_node: 8
  intra_node: nvswitch
  inter_node: {inter}
{extra}model: {{generator: transformer, layers: {layers}, hidden: 1024, heads: 16, sequence: 1024, vocab: 32000}}
training: {{global_batch: 64, micro_batch: 1}}
strategy: {strategy}
)",
                     fmt::arg("gpu", gpu), fmt::arg("nodes", nodes), fmt::arg("inter", inter),
                     fmt::arg("extra", extra_cluster), fmt::arg("layers", layers),
                     fmt::arg("strategy", strategy));
}

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
struct Reports {
  nlohmann::json implicit, full;
  int built = 0, copies = 0;
  // The implicit run's timeline read through Timeline::device and Timeline::link (its own
  // tables hold the built devices and the orbits alone) against the full run's.
  size_t devices_differ = 0, links_differ = 0, link_directions = 0, full_directions = 0;
};
// `fold_full`: the full graph's copies folded by the engine (the run before copies were left
// implicit), else every copy simulated.
Reports reports(const std::string& yaml, bool fold_full = false) {
  const Scenario sc = load_scenario_text(yaml, "copies.yaml");
  const RunInfo info = run_info(sc, 0.0);
  const TaskGraph folded = folded_task_graph(sc);
  const TaskGraph full = scenario_task_graph(sc, true);
  SimOptions off;
  off.fold = fold_full;
  Reports r;
  const Timeline a = simulate(folded, sc.cluster), b = simulate(full, sc.cluster, off);
  r.implicit = nlohmann::json::parse(to_json(make_report(folded, sc.cluster, a, info)));
  r.full = nlohmann::json::parse(to_json(make_report(full, sc.cluster, b, info)));
  for (int d = 0; d < sc.cluster.num_devices(); ++d) {
    const DeviceStats &x = a.device(d), &y = b.device(d);
    r.devices_differ += x.busy != y.busy || x.peak_memory != y.peak_memory ||
                        x.peak_time != y.peak_time || x.at_peak != y.at_peak;
  }
  r.link_directions = a.num_link_directions();
  r.full_directions = b.num_link_directions();
  for (size_t l = 0; l < std::min(r.link_directions, r.full_directions); ++l) {
    const LinkStats x = a.link(static_cast<LinkDirection>(l)),
                    y = b.link(static_cast<LinkDirection>(l));
    r.links_differ += x.bytes != y.bytes || x.busy != y.busy || x.peak_flows != y.peak_flows;
  }
  r.implicit.erase("events");
  r.full.erase("events");
  r.built = folded.built_copies();
  r.copies = folded.copies();
  return r;
}

// Checks that the run with copies left implicit reports what the full run reports, device
// by device and link by link; whether any copy was left implicit.
bool expect_agrees(const Reports& r) {
  EXPECT_EQ(r.implicit, r.full);
  EXPECT_EQ(r.devices_differ, 0u);
  EXPECT_EQ(r.links_differ, 0u);
  return r.built < r.copies;
}

// Servers' inter-node ports drawn at random: one port a server, or one a GPU.
std::string random_ports(std::mt19937& rng, int per_node) {
  return rng() % 2 ? "ib-ndr" : fmt::format("{{preset: ib-ndr, nics: {}}}", per_node);
}

TEST(Copies, ImplicitCopiesReportTheFullRun) {
  // Pipeline x data with a NIC per GPU (copies one at a time), ZeRO-1 and interleaving
  // across nodes of one NIC (copies a node at a time), DAPPLE's stage replicas in each
  // copy, ZeRO-3's weight gathers, and copies out of memory.
  const std::vector<std::string> yamls = {
      scenario(4, "{preset: ib-ndr, nics: 8}",
               "{schedule: dapple, pipeline: 4, data: 8, allreduce: ring}"),
      scenario(8, "ib-ndr",
               "{schedule: interleaved, virtual_stages: 2, pipeline: 2, tensor: 4, data: 8, "
               "zero: 1, allreduce: ring}"),
      R"(cluster: {gpu: h100-80gb, nodes: 4, gpus_per_node: 8, intra_node: nvswitch, inter_node: ib-ndr}
model: {generator: transformer, layers: 8, hidden: 1024, heads: 16, sequence: 1024, vocab: 32000}
training: {global_batch: 64, micro_batch: 2}
strategy: {schedule: dapple, stages: [{layers: 0-4, replicas: 2}, {layers: 5-9, replicas: 2}], data: 8, allreduce: ring}
)",
      scenario(2, "{preset: ib-ndr, nics: 8}",
               "{schedule: dapple, pipeline: 2, data: 8, zero: 3, allreduce: ring}"),
      scenario(2, "{preset: ib-ndr, nics: 8}",
               "{schedule: gpipe, pipeline: 2, data: 8, allreduce: ring}", 48, "", "v100-16gb"),
  };
  for (const std::string& yaml : yamls) {
    SCOPED_TRACE(yaml);
    const Reports r = reports(yaml);
    EXPECT_LT(r.built, r.copies);
    EXPECT_EQ(r.implicit, r.full);
    EXPECT_EQ(r.devices_differ, 0u);
    EXPECT_EQ(r.link_directions, r.full_directions);
    EXPECT_EQ(r.links_differ, 0u);
  }
}

// The fold found while lowering is kept with the graph for its cluster's state alone: a
// copy of the cluster keeps its revision (the engine takes the kept fold), a slowdown or a
// cluster built again names another (the engine checks the fold again), and either way the
// run is the same.
TEST(Copies, TheFoldFoundWhileLoweringIsKeptForItsClusterOnly) {
  const Scenario sc = load_scenario_text(
      scenario(4, "{preset: ib-ndr, nics: 8}",
               "{schedule: dapple, pipeline: 4, data: 8, allreduce: ring}"),
      "copies.yaml");
  const TaskGraph g = folded_task_graph(sc);
  ASSERT_LT(g.built_copies(), g.copies());
  ASSERT_NE(g.kept_fold(sc.cluster.revision()), nullptr);
  const Cluster same = sc.cluster;
  EXPECT_EQ(same.revision(), sc.cluster.revision());
  Cluster slowed = sc.cluster;
  slowed.slow_down_device(0, 1.0);  // (a factor of one: the same figures, a new state)
  EXPECT_NE(slowed.revision(), sc.cluster.revision());
  EXPECT_EQ(g.kept_fold(slowed.revision()), nullptr);
  Cluster off = sc.cluster;
  off.set_slowdowns(false);
  EXPECT_NE(off.revision(), sc.cluster.revision());
  const Scenario again = load_scenario_text(
      scenario(4, "{preset: ib-ndr, nics: 8}",
               "{schedule: dapple, pipeline: 4, data: 8, allreduce: ring}"),
      "copies.yaml");
  EXPECT_NE(again.cluster.revision(), sc.cluster.revision());
  const Timeline kept = simulate(g, same), found = simulate(g, slowed);
  expect_identical(kept, found);
  EXPECT_EQ(simulate(g, again.cluster).makespan, kept.makespan);
}

TEST(Copies, CopiesThatDoNotFoldAreBuiltInFull) {
  // A straggler, and a tree all-reduce: every copy built and simulated.
  for (const std::string& yaml :
       {scenario(2, "{preset: ib-ndr, nics: 8}",
                 "{schedule: dapple, pipeline: 2, data: 8, allreduce: ring}", 8,
                 "  slowdown: [{device: node0/gpu5, compute: 1.5}]\n"),
        scenario(2, "{preset: ib-ndr, nics: 8}",
                 "{schedule: dapple, pipeline: 2, data: 8, allreduce: tree}")}) {
    const Reports r = reports(yaml);
    EXPECT_EQ(r.built, r.copies);
    EXPECT_EQ(r.implicit, r.full);
  }
}

// The group of copies lower_folded leaves implicit is the first that folds when every
// group is built and checked in turn: judging a group's links on copy 0's graph before
// building it (sim/copies.cc, links_may_fold) skips only groups that would not fold.
// Copies one at a time (a NIC per GPU), a node at a time (one NIC per node: groups of 2
// and 4), scatter-first placements that fold at no group, and random strategies.
TEST(Copies, TheGroupFoundIsTheFirstThatFoldsWhenEachIsBuilt) {
  std::vector<std::string> yamls = {
      scenario(4, "{preset: ib-ndr, nics: 8}",
               "{schedule: dapple, pipeline: 4, data: 8, allreduce: ring}"),
      scenario(8, "ib-ndr",
               "{schedule: interleaved, virtual_stages: 2, pipeline: 2, tensor: 4, data: 8, "
               "zero: 1, allreduce: ring}"),
      scenario(4, "ib-ndr", "{schedule: dapple, pipeline: 2, data: 16, allreduce: ring}"),
      scenario(4, "{preset: ib-ndr, nics: 8}",
               "{schedule: dapple, pipeline: 4, tensor: 2, data: 4, allreduce: ring, "
               "placement: scatter-first}"),
      scenario(4, "ib-ndr",
               "{schedule: dapple, pipeline: 2, tensor: 2, data: 8, allreduce: ring, "
               "placement: scatter-first}")};
  std::mt19937 rng(41);
  const char* placements[] = {"append-first", "fresh-first", "scatter-first"};
  for (int trial = 0; trial < 12; ++trial) {
    const int pp = 1 << (rng() % 3), tp = 1 << (rng() % 2), dp = 8 << (rng() % 2);
    yamls.push_back(scenario(
        pp * tp * dp / 8, rng() % 2 ? "ib-ndr" : "{preset: ib-ndr, nics: 8}",
        fmt::format("{{schedule: dapple, pipeline: {}, tensor: {}, data: {}, allreduce: ring, "
                    "placement: {}}}",
                    pp, tp, dp, placements[rng() % 3])));
  }
  int implicit = 0, full = 0;
  for (const std::string& yaml : yamls) {
    SCOPED_TRACE(yaml);
    const Scenario sc = load_scenario_text(yaml, "copies.yaml");
    int first = 0;  // the first group that folds when each is built, 0: none
    scenario_task_graph(sc, true, [&](LoweringInput in) {
      for (const int group : fold_groups(static_cast<int>(in.placement->size()))) {
        if (!may_build_copies(in, group)) continue;
        in.built_copies = group;
        const TaskGraph g = lower(in);
        if (fold_copies(g, sc.cluster)) {
          first = group;
          return g;
        }
      }
      in.built_copies = 0;
      return lower(in);
    });
    const TaskGraph g = folded_task_graph(sc);
    EXPECT_EQ(g.built_copies(), first == 0 ? g.copies() : first);
    (first == 0 ? full : implicit) += 1;
  }
  EXPECT_GT(implicit, 4);
  EXPECT_GT(full, 1);
}

// Copies that do not fold (scatter-first puts copies 0 and 1 on two nodes, copy 2 on one):
// past the limit on every copy's ops, an error before that graph is built; under it, the
// full graph.
TEST(Copies, CopiesThatDoNotFoldPastTheLimitAreRefusedBeforeTheyAreBuilt) {
  const Scenario sc = load_scenario_text(
      scenario(4, "{preset: ib-ndr, nics: 8}",
               "{schedule: dapple, pipeline: 4, tensor: 2, data: 4, allreduce: ring, "
               "placement: scatter-first}"),
      "copies.yaml");
  const TaskGraph g = folded_task_graph(sc);
  ASSERT_EQ(g.built_copies(), g.copies());
  const auto size = static_cast<double>(g.size());
  EXPECT_EQ(folded_task_graph(sc, size).size(), g.size());
  try {
    folded_task_graph(sc, size / 2);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("copies do not fold"), std::string::npos) << e.what();
  }
}

// A group of copies whose share of the estimate is past the limit is not built: with the
// limit under the group's share of every copy's ops, no group is built, and the estimate
// past the limit refuses the run before every copy is built; with it above, the group is.
TEST(Copies, AGroupPastTheLimitIsNotBuilt) {
  const Scenario sc = load_scenario_text(
      scenario(4, "ib-ndr", "{schedule: dapple, pipeline: 2, data: 16, allreduce: ring}"),
      "copies.yaml");
  const TaskGraph folded = folded_task_graph(sc);
  ASSERT_LT(folded.built_copies(), folded.copies());
  const auto full = static_cast<double>(scenario_task_graph(sc, true).size());
  const double share = full * folded.built_copies() / folded.copies();
  EXPECT_THROW(folded_task_graph(sc, share * 0.9, full), CopiesDoNotFold);
  EXPECT_EQ(folded_task_graph(sc, share * 1.1, full).built_copies(), folded.built_copies());
}

// Where no group of copies may be built (a tree all-reduce, may_build_copies), the caller's
// estimate of every copy's ops decides before the graph is built: past the limit, an error;
// no estimate (0) or one within it, the full graph.
TEST(Copies, WhereNoGroupMayBeBuiltTheEstimateDecides) {
  const Scenario sc = load_scenario_text(
      scenario(2, "{preset: ib-ndr, nics: 8}",
               "{schedule: dapple, pipeline: 2, data: 8, allreduce: tree}"),
      "copies.yaml");
  const TaskGraph g = folded_task_graph(sc);
  ASSERT_EQ(g.built_copies(), g.copies());
  const auto size = static_cast<double>(g.size());
  EXPECT_EQ(folded_task_graph(sc, size / 2).size(), g.size());
  EXPECT_EQ(folded_task_graph(sc, size / 2, size / 4).size(), g.size());
  EXPECT_THROW(folded_task_graph(sc, size / 2, size), CopiesDoNotFold);
}

// `gpus` H100s, up to `per_node` a server, joined by `inter`; an 8-layer transformer of
// hidden 512 (`model` adds its sequence and other keys) at micro-batch 1.
std::string small_run(int gpus, const std::string& inter, const std::string& model,
                      int64_t global_batch, const std::string& strategy, int per_node = 8) {
  return fmt::format(R"(cluster:
  gpu: h100-80gb
  nodes: {}
  gpus_per_node: {}
  intra_node: nvswitch
  inter_node: {}
model: {{generator: transformer, layers: 8, hidden: 512, heads: 8, vocab: 8000, {}}}
training: {{global_batch: {}, micro_batch: 1}}
strategy: {}
)",
                     std::max(1, gpus / per_node), std::min(gpus, per_node), inter, model,
                     global_batch, strategy);
}

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

// Context-parallel copies, random layouts: the copies built a group at a time (each group
// whole context groups, may_build_copies) report what the full run reports, device by
// device and link by link.
TEST(Copies, ContextGroupsBuiltWholeAgreeWithTheFullRun) {
  std::mt19937 rng(53);
  const char* comms[] = {"p2p", "all-gather", "a2a"};
  const char* schedules[] = {"dapple", "interleaved", "zb-h1"};
  int implicit = 0;
  for (int trial = 0; trial < 16; ++trial) {
    const int cp = 2 << (rng() % 2), pp = 1 << (rng() % 2), tp = 1 << (rng() % 2);
    const int dp = 2 << (rng() % 2);
    const int gpus = cp * pp * tp * dp;
    const std::string sched = pp == 1 ? "dapple" : schedules[rng() % 3];
    const std::string strategy = fmt::format(
        "{{schedule: {}, pipeline: {}, tensor: {}, context: {}, context_comm: {}, data: {}, "
        "zero: {}, allreduce: ring{}{}}}",
        sched, pp, tp, cp, comms[rng() % 3], dp, rng() % 2,
        tp > 1 ? ", sequence_parallel: true" : "",
        sched == "interleaved" ? ", virtual_stages: 2" : "");
    SCOPED_TRACE(strategy);
    const std::string yaml =
        small_run(gpus, fmt::format("{{preset: ib-ndr, nics: {}}}", std::min(gpus, 8)),
                  "sequence: 1024, flash_attention: true", dp * 4, strategy);
    const Reports r = reports(yaml);
    if (expect_agrees(r)) {
      ++implicit;
      EXPECT_EQ(r.built % cp, 0);
    }
  }
  EXPECT_GT(implicit, 8);
}

// Expert-parallel copies, random layouts (EP 2 and 4, expert tensor parallelism, ZeRO or
// not): the copies built a group at a time (each group whole expert groups,
// may_build_copies; the experts' gradient rings reach the implicit copies through their
// images) report what the full run reports.
TEST(Copies, ExpertGroupsBuiltWholeAgreeWithTheFullRun) {
  std::mt19937 rng(71);
  int implicit = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int tp = 1 << (rng() % 2), pp = 1 << (rng() % 2), dp = 2 << (rng() % 3);
    const int etp = 1 << (rng() % 2), ep = 1 << (1 + rng() % 2);
    if ((dp * tp) % (ep * etp) != 0) continue;
    const int gpus = pp * tp * dp;
    const std::string strategy = fmt::format(
        "{{schedule: dapple, pipeline: {}, tensor: {}, data: {}, expert: {}, expert_tensor: {}, "
        "zero: {}, allreduce: ring{}}}",
        pp, tp, dp, ep, etp, rng() % 2, tp > 1 ? ", sequence_parallel: true" : "");
    SCOPED_TRACE(strategy);
    const std::string yaml =
        small_run(gpus, fmt::format("{{preset: ib-ndr, nics: {}}}", std::min(gpus, 8)),
                  "sequence: 512, experts: 8, top_k: 2, expert_ffn: 1024, mlp: swiglu, "
                  "norm: rmsnorm, position: rotary",
                  dp * 4, strategy);
    const Reports r = reports(yaml);
    implicit += expect_agrees(r);
  }
  EXPECT_GT(implicit, 4);
}

// Hierarchical collectives (a ring inside each server, one across the servers per local
// rank), random layouts with and without ZeRO, context and expert parallelism, servers of
// 4 and 8 GPUs, every placement: copies built a group at a time where the group fills
// whole servers (may_build_copies), their rings across the servers reaching the implicit
// copies through their images, report what the full graph reports with its copies folded
// by the engine (before, the run of these layouts), and its makespan to rounding with every
// copy simulated (a fold re-rates smaller flow components, sim/copies.h).
TEST(Copies, HierarchicalCollectivesBuiltByServerAgreeWithTheFullRun) {
  std::mt19937 rng(83);
  const char* placements[] = {"append-first", "fresh-first", "scatter-first"};
  int implicit = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int per_node = 4 << (rng() % 2), pp = 1 << (rng() % 2), tp = 1 << (rng() % 2);
    const int dp = 4 << (rng() % 2), cp = trial % 3 == 1 ? 2 : 1;
    const int ep = trial % 3 == 2 ? 2 << (rng() % 2) : 1;
    const int gpus = pp * tp * cp * dp;
    if (gpus < 2 * per_node || (dp * tp) % ep != 0) continue;
    std::string extra;
    if (cp > 1) extra += fmt::format(", context: {}", cp);
    if (ep > 1) extra += fmt::format(", expert: {}", ep);
    if (tp > 1) extra += ", sequence_parallel: true";
    const std::string strategy = fmt::format(
        "{{schedule: dapple, pipeline: {}, tensor: {}, data: {}, zero: {}, allreduce: "
        "hierarchical, placement: {}{}}}",
        pp, tp, dp, ep > 1 ? rng() % 2 : rng() % 4, placements[rng() % 3], extra);
    const std::string inter = random_ports(rng, per_node);
    SCOPED_TRACE(strategy + " " + inter + fmt::format(" per node {}", per_node));
    const std::string model =
        ep > 1 ? "sequence: 512, experts: 8, top_k: 2, expert_ffn: 1024, mlp: swiglu"
               : "sequence: 512, flash_attention: true";
    const std::string yaml = small_run(gpus, inter, model, dp * 4, strategy, per_node);
    const Reports r = reports(yaml, true);
    implicit += expect_agrees(r);
    // Every copy simulated: the same to the rounding of the flows' shared rates.
    const Reports every = reports(yaml);
    EXPECT_NEAR(every.implicit["makespan_s"].get<double>(), every.full["makespan_s"].get<double>(),
                1e-9 * every.full["makespan_s"].get<double>());
  }
  EXPECT_GT(implicit, 10);
}

// One expert group over every copy's members (EP = DP x TP, Qwen3's and DeepSeek-V3's
// layouts), random layouts over servers of 4 and 8 GPUs, one port or one a GPU, ZeRO or
// not, with and without a pipeline: copies built a server at a time (may_build_copies),
// the all-to-alls reaching the implicit members through their images (AllToAllImages),
// report what every copy simulated reports. (The full graph cannot fold in the engine:
// its all-to-alls make copy 0 wait for other copies' sends.)
TEST(Copies, ExpertGroupsAcrossEveryCopyBuiltByServerAgreeWithTheFullRun) {
  std::mt19937 rng(97);
  const char* schedules[] = {"dapple", "interleaved", "zb-h1"};
  int implicit = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int per_node = 4 << (rng() % 2), pp = 1 << (rng() % 2), tp = 1 << (rng() % 2);
    const int dp = 4 << (rng() % 2), ep = dp * tp;
    const int gpus = pp * tp * dp;
    if (gpus < 2 * per_node) continue;
    const std::string sched = pp == 1 ? "dapple" : schedules[rng() % 3];
    const std::string strategy = fmt::format(
        "{{schedule: {}, pipeline: {}, tensor: {}, data: {}, expert: {}, zero: {}, "
        "allreduce: {}{}{}}}",
        sched, pp, tp, dp, ep, rng() % 2, rng() % 2 ? "ring" : "hierarchical",
        tp > 1 ? ", sequence_parallel: true" : "",
        sched == "interleaved" ? ", virtual_stages: 2" : "");
    const std::string inter = random_ports(rng, per_node);
    SCOPED_TRACE(strategy + " " + inter + fmt::format(" per node {}", per_node));
    const Reports r = reports(small_run(gpus, inter,
                                        fmt::format("sequence: 512, experts: {}, top_k: 2, "
                                                    "expert_ffn: 1024, mlp: swiglu",
                                                    2 * ep),
                                        dp * 4, strategy, per_node));
    implicit += expect_agrees(r);
  }
  EXPECT_GT(implicit, 8);
}

}  // namespace
}  // namespace pipesim
