// Identical data-parallel copies left implicit while lowering (sim/copies.h lower_folded,
// may_build_copies): the first copies of each group are built, the others stand as their
// images; the report is the full run's, device by device and link by link.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/error.h"
#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "schedules/lower.h"
#include "sim/copies.h"
#include "sim/engine.h"
#include "tests/copies_support.h"

namespace pipesim {
namespace {

using namespace test;

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
  const Scenario sc =
      load_scenario_text(scenario(4, "{preset: ib-ndr, nics: 8}",
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
  const Scenario again =
      load_scenario_text(scenario(4, "{preset: ib-ndr, nics: 8}",
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
  const Scenario sc =
      load_scenario_text(scenario(2, "{preset: ib-ndr, nics: 8}",
                                  "{schedule: dapple, pipeline: 2, data: 8, allreduce: tree}"),
                         "copies.yaml");
  const TaskGraph g = folded_task_graph(sc);
  ASSERT_EQ(g.built_copies(), g.copies());
  const auto size = static_cast<double>(g.size());
  EXPECT_EQ(folded_task_graph(sc, size / 2).size(), g.size());
  EXPECT_EQ(folded_task_graph(sc, size / 2, size / 4).size(), g.size());
  EXPECT_THROW(folded_task_graph(sc, size / 2, size), CopiesDoNotFold);
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
    const auto [per_node, pp, tp, dp] = random_server_layout(rng);
    const int cp = trial % 3 == 1 ? 2 : 1;
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
    const auto [per_node, pp, tp, dp] = random_server_layout(rng);
    const int ep = dp * tp;
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
