// The planner's estimate where traffic meets on a server's network port
// (planner/network_costs.h, planner/cost_model.h): one micro-batch's cuts summed on each
// link, every copy's cuts at once, data-parallel groups of different stages sharing a port
// by processor sharing, and ports per node. Worked by hand on single-GPU and two-GPU servers
// joined by a slow Ethernet, and checked against the simulator where it sets the pace.
#include <gtest/gtest.h>

#include "planner/cost_model.h"
#include "planner/network_costs.h"
#include "planner/planner.h"
#include "tests/planner_cases.h"
#include "tests/support.h"

namespace pipesim {
namespace {

// Four layers of F 1 ms, B 2 ms, 1 MiB outputs, on `nodes` servers of `gpus` GPUs each at
// 1 Gbit/s between them.
test::Case four_layers(int nodes, int gpus) {
  test::Case c;
  c.name = "estimate";
  c.nodes = nodes;
  c.gpus_per_node = gpus;
  c.inter = "1 Gbit/s";
  c.micro_batch = 1;
  c.global_batch = 8;
  for (int i = 0; i < 4; ++i) c.layers.emplace_back(1.0, 2.0, 4, 1, "1M");
  return c;
}

planner::PlanPoint interleaved_two_by_two(const Scenario& s) {
  planner::PlanPoint p;
  p.schedule = ScheduleKind::kInterleaved;
  p.virtual_stages = 2;
  for (int l = 0; l < 4; ++l) p.stages.push_back({l, l, 1});
  p.micro_batch = s.training.micro_batch;
  return p;
}

// Two stages of two replicas each, scatter-first over 2 servers of 2 GPUs (each stage's
// group spans both), with their gradient all-reduce terms.
struct ScatteredStages {
  planner::Placement placed;
  std::vector<double> allreduce;
};
ScatteredStages scattered_stages(const planner::CostModel& cm) {
  planner::PlanPoint p;
  p.stages = {{0, 1, 2}, {2, 3, 2}};
  p.placement = PlacementPolicy::kScatterFirst;
  ScatteredStages x;
  x.placed = p.devices(cm.scenario().cluster);
  cm.allreduce_terms(p, &x.placed, false, x.allreduce);
  return x;
}

// Interleaved, 2 positions on 2 single-GPU servers, 2 chunks each: stages 0 and 2 on
// server 0, 1 and 3 on server 1. Server 0's port out carries stage 0's output to 1, stage
// 2's output to 3 and stage 2's gradient back to 1: 3 x 1 MiB per micro-batch, where each
// cut alone saw one. The steady state can go no faster; the simulation, whose only port
// that is, neither.
TEST(Estimate, OneMicroBatchsCutsSumOnTheServersPort) {
  const test::Case c = four_layers(2, 1);
  const Scenario s = load_scenario(test::case_file(c, "est-cuts"));
  const planner::CostModel cm(s);
  const planner::PlanPoint p = interleaved_two_by_two(s);
  std::vector<double> cut;
  const double load = cm.cut_terms(p, nullptr, cut);
  const double bytes = static_cast<double>(cm.output_bytes(0));
  const Route& r = s.cluster.route(0, 1);
  EXPECT_NEAR(load, 3 * bytes / r.bottleneck_bytes_per_s, 1e-12);
  ASSERT_EQ(cut.size(), 3u);
  EXPECT_NEAR(cut[0], r.latency.seconds() + bytes / r.bottleneck_bytes_per_s, 1e-12);
  const int64_t M = 8;
  const planner::Estimate e = cm.estimate(p, M);
  EXPECT_GE(e.block_s, load);
  EXPECT_GE(e.iteration_s, M * load);
  // The simulation: 8 micro-batches through the one port (8.4 ms each way per MiB).
  const Report run =
      test::run_yaml(
          test::scenario_yaml(c,
                              "  schedule: interleaved\n  virtual_stages: 2\n  stages:\n"
                              "    - {layers: 0, replicas: 1}\n    - {layers: 1, replicas: 1}\n"
                              "    - {layers: 2, replicas: 1}\n    - {layers: 3, replicas: 1}\n"))
          .report;
  EXPECT_GE(run.iteration_time.seconds(), M * load * (1 - 1e-9));
  EXPECT_NEAR(e.iteration_s / run.iteration_time.seconds(), 1.0, 0.25);
}

// Two data-parallel copies placed fresh-first over 2 servers of 2 GPUs: copy k's position q
// on server q, so both copies' cut 0 -> 1 leave server 0 through its one port at once:
// the cut takes twice one copy's time.
TEST(Estimate, CopiesCrossingOnePortShareIt) {
  test::Case c = four_layers(2, 2);
  const Scenario s = load_scenario(test::case_file(c, "est-copies"));
  const planner::CostModel cm(s);
  planner::PlanPoint p;
  p.stages = {{0, 1, 1}, {2, 3, 1}};
  p.data = 2;
  p.placement = PlacementPolicy::kFreshFirst;
  const planner::Placement placed = p.devices(s.cluster);
  ASSERT_EQ(s.cluster.device(placed[0][0][0]).node, s.cluster.device(placed[1][0][0]).node);
  std::vector<double> alone, both;
  cm.cut_terms(p, nullptr, alone);  // append-first: each copy on its own server
  cm.cut_terms(p, &placed, both);
  const double bytes = static_cast<double>(cm.output_bytes(1));
  const Route& r = s.cluster.route(0, 2);
  EXPECT_NEAR(both[0], r.latency.seconds() + 2 * bytes / r.bottleneck_bytes_per_s, 1e-12);
  EXPECT_LT(alone[0], both[0]);
}

// Data-parallel groups of two stages, each spanning both servers (scatter-first), all-reduce
// at once through the same port. A group of B bytes beside one of B' ends after
// min(B, B') + B of the port's time, so its steps through the port take (B + min(B, B')) / B
// as long: the small stage 2x, the large one (1 + small/large)x.
TEST(Estimate, GroupsOfStagesShareAPortByProcessorSharing) {
  test::Case c = four_layers(2, 2);
  std::get<4>(c.layers[0]) = "30M";  // stage 0 (layers 0-1): 31 M parameters, stage 1: 2 M
  const Scenario s = load_scenario(test::case_file(c, "est-groups"));
  const planner::CostModel cm(s);
  const ScatteredStages x = scattered_stages(cm);
  const planner::Placement& placed = x.placed;
  const std::vector<double>& ar = x.allreduce;
  const planner::NetworkCosts net(s);
  const auto group = [&](int q) { return placed[0][static_cast<size_t>(q)]; };
  ASSERT_NE(s.cluster.device(group(0)[0]).node, s.cluster.device(group(0)[1]).node);
  const double big = static_cast<double>(cm.gradient_bytes(0, 1));
  const double small = static_cast<double>(cm.gradient_bytes(2, 3));
  EXPECT_NEAR(ar[0], net.allreduce(group(0), cm.gradient_bytes(0, 1), false, (big + small) / big),
              1e-12);
  EXPECT_NEAR(ar[1], net.allreduce(group(1), cm.gradient_bytes(2, 3), false, 2.0), 1e-12);
  EXPECT_GT(ar[1], net.allreduce(group(1), cm.gradient_bytes(2, 3)));
}

// With a port per GPU (`nics: 2` on 2-GPU servers), the two groups above leave through
// different ports and share nothing; the tensor ranks of a group neither.
TEST(Estimate, APortPerGpuIsSharedByNoOtherGroup) {
  std::string ported =
      test::scenario_yaml(four_layers(2, 2), "  schedule: dapple\n  pipeline: 1\n");
  const std::string from = "latency: 10 us}";
  ported.replace(ported.find(from), from.size(), "latency: 10 us, nics: 2}");
  const Scenario s = load_scenario(test::write_temp("est-ports.yaml", ported));
  EXPECT_EQ(s.cluster.nics_per_node(), 2);
  EXPECT_NE(s.cluster.nic_of(0), s.cluster.nic_of(1));
  EXPECT_EQ(s.cluster.nic_of(2) - s.cluster.nic_of(0), 2);  // server 1's port 0
  const planner::CostModel cm(s);
  const ScatteredStages x = scattered_stages(cm);
  const planner::Placement& placed = x.placed;
  const std::vector<double>& ar = x.allreduce;
  const planner::NetworkCosts net(s);
  EXPECT_NEAR(ar[1], net.allreduce(placed[0][1], cm.gradient_bytes(2, 3)), 1e-12);
  EXPECT_DOUBLE_EQ(net.tensor_ways(2), 1.0);
  EXPECT_DOUBLE_EQ(net.tensor_ways(4), 2.0);
}

}  // namespace
}  // namespace pipesim
