// The shared experts beside the token dispatch (strategy.shared_expert_overlap, Megatron-
// Core's --moe-shared-expert-overlap): worked by hand on one MoE layer over 2 expert ranks,
// and end to end on a generated model.
#include <gtest/gtest.h>

#include "schedules/lower.h"
#include "schedules/order.h"
#include "sim/engine.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

// One MoE layer, no parameters: per micro-batch the router and permutation take 1 ms
// forward (2 ms backward), the routed experts 2 (4), the un-permutation 1 (2), the shared
// experts 3 (6). The dispatch moves 200 MB of routed tokens: over 2 expert ranks each sends
// half of them, 100 MB, to the other over a 100 GB/s NVLink: 1 ms per all-to-all.
Layer moe_layer() {
  Layer x;
  x.name = "moe";
  x.moe = MoeFacts{2, 1, 0, 200'000'000, 0};
  const auto piece = [](PieceKind k, double f) {
    return LayerPiece{k, test::ms(f), test::ms(2 * f), Time::zero(), {}, {}, {}};
  };
  x.pieces = {piece(PieceKind::kPreExperts, 1), piece(PieceKind::kExperts, 2),
              piece(PieceKind::kPostExperts, 1), piece(PieceKind::kSharedExperts, 3)};
  x.forward = test::ms(7);
  x.backward_input = test::ms(14);
  return x;
}

StageProfile moe_stage(bool overlap) {
  Model m;
  m.layers = {moe_layer()};
  GroupDegrees g;
  g.expert = 2;
  g.shared_expert_overlap = overlap;
  return stage_profiles(m, {{0, 0, 1, {}, {}, {}}}, {}, {}, false, g).front();
}

// One micro-batch under GPipe on the 2 expert ranks (2 data-parallel copies, one GPU each).
Time moe_makespan(bool overlap) {
  LoweringInput in = test::two_copies_gpipe();
  in.expert = 2;
  in.stages = {moe_stage(overlap)};
  return simulate(lower(in), test::two_gpus(100e9)).makespan;
}

TEST(SharedExperts, PiecesBesideTheDispatchOrAfterTheRest) {
  // Without the overlap the shared experts join the un-permutation: 3 pieces, the dispatch
  // after the first, as for a layer without shared experts.
  const auto plain = moe_stage(false).layers.front().pieces;
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[2].forward, test::ms(4));
  EXPECT_EQ(plain[0].forward_after.kind, TpCollective::Kind::kAllToAll);
  EXPECT_EQ(plain[0].forward_after.bytes, 200'000'000);
  // With it they come second, the dispatch beside them both ways; the combine stays after
  // the routed experts (forward) and the un-permutation (backward).
  const auto over = moe_stage(true).layers.front().pieces;
  ASSERT_EQ(over.size(), 4u);
  EXPECT_EQ(over[1].forward, test::ms(3));
  EXPECT_EQ(over[0].forward_after.bytes, 0);
  EXPECT_EQ(over[1].forward_beside.bytes, 200'000'000);
  EXPECT_EQ(over[1].backward_beside.bytes, 200'000'000);
  EXPECT_EQ(over[2].backward_after.bytes, 0);
  EXPECT_EQ(over[2].forward_after.bytes, 200'000'000);
  EXPECT_EQ(over[3].backward_after.bytes, 200'000'000);
}

TEST(SharedExperts, TheDispatchHidesBehindThem) {
  // Without: forward 1 + 1 (dispatch) + 2 + 1 (combine) + 1 + 3 = 9 ms; backward 2 + 6, 1
  // (the combine's gradients), 4, 1 (the dispatch's), 2 = 16 ms: 25 ms.
  EXPECT_EQ(moe_makespan(false), Time::ms(25));
  // With: forward 1 + max(3, 1) + 2 + 1 + 1 = 8 ms; backward 2 + 1 + 4 + max(6, 1) + 2 =
  // 15 ms: 23 ms, the two dispatches hidden.
  EXPECT_EQ(moe_makespan(true), Time::ms(23));
}

// A generated model with a shared expert: the overlap shortens the step and the time waited
// on all-to-alls; it warns where it cannot act (no token exchange, no shared experts).
std::string shared_moe(const std::string& strategy, int shared = 1) {
  return "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 4, intra_node: nvswitch3}\n"
         "model: {generator: transformer, layers: 2, hidden: 1024, heads: 8, sequence: 2048, "
         "vocab: 1000, experts: 8, top_k: 2, expert_ffn: 1024, shared_experts: " +
         std::to_string(shared) +
         ", mlp: swiglu, norm: rmsnorm, position: rotary}\n"
         "training: {global_batch: 16, micro_batch: 1, precision: bf16, optimizer: adam}\n"
         "strategy: {schedule: 1f1b, pipeline: 1, data: 4, " +
         strategy + "}\n";
}

TEST(SharedExperts, OverlapShortensAGeneratedModelsStep) {
  const test::SimRun off = test::run_yaml(shared_moe("expert: 4"));
  const test::SimRun on = test::run_yaml(shared_moe("expert: 4, shared_expert_overlap: true"));
  EXPECT_LT(on.report.iteration_time, off.report.iteration_time);
  EXPECT_TRUE(on.report.info.warnings.empty());
  const test::SimRun idle = test::run_yaml(shared_moe("shared_expert_overlap: true"));
  ASSERT_EQ(idle.report.info.warnings.size(), 1u);
  EXPECT_NE(idle.report.info.warnings[0].find("strategy.shared_expert_overlap: no effect"),
            std::string::npos);
  const test::SimRun none =
      test::run_yaml(shared_moe("expert: 4, shared_expert_overlap: true", 0));
  ASSERT_EQ(none.report.info.warnings.size(), 1u);
  EXPECT_NE(none.report.info.warnings[0].find("no shared experts"), std::string::npos);
  // Without the overlap the same step as a scenario that never names it.
  EXPECT_EQ(test::run_yaml(shared_moe("expert: 4, shared_expert_overlap: false"))
                .report.iteration_time,
            off.report.iteration_time);
}

}  // namespace
}  // namespace pipesim
