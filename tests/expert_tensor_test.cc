// Expert tensor parallelism (strategy.expert_tensor, SPEC section 9; Megatron-Core's
// --expert-tensor-parallel-size): each expert's GEMMs split over expert-tensor ranks, the
// dispatched tokens all-gathered over them before the experts and the outputs
// reduce-scattered after; worked by hand on one MoE layer, and end to end on a generated
// model.
#include <gtest/gtest.h>

#include "costs/models.h"
#include "planner/planner.h"
#include "schedules/lower.h"
#include "schedules/order.h"
#include "sim/engine.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

// One MoE layer, no parameters: per micro-batch the router and permutation take 1 ms
// forward (2 ms backward), the routed experts 2 (4), the un-permutation 1 (2). A rank's
// dispatch moves D = 200 MB of routed tokens.
Layer moe_layer() {
  Layer x;
  x.name = "moe";
  x.moe = MoeFacts{4, 1, 0, 200'000'000, 0};
  const auto piece = [](PieceKind k, double f) {
    return LayerPiece{k, test::ms(f), test::ms(2 * f), Time::zero(), {}, {}, {}};
  };
  x.pieces = {piece(PieceKind::kPreExperts, 1), piece(PieceKind::kExperts, 2),
              piece(PieceKind::kPostExperts, 1)};
  x.forward = test::ms(4);
  x.backward_input = test::ms(8);
  return x;
}

StageProfile moe_stage(int expert, int expert_tensor) {
  Model m;
  m.layers = {moe_layer()};
  GroupDegrees g;
  g.expert = expert;
  g.expert_tensor = expert_tensor;
  return stage_profiles(m, {{0, 0, 1, {}, {}, {}}}, {}, {}, false, g).front();
}

// `gpus` data-parallel copies of one GPU each on one 100 GB/s switch (no latency), one
// micro-batch under GPipe.
Time moe_makespan(int gpus, int expert, int expert_tensor) {
  LoweringInput in = test::two_copies_gpipe();
  Placement placement;
  for (int d = 0; d < gpus; ++d) placement.push_back({{d}});
  in.placement = std::make_shared<const Placement>(std::move(placement));
  in.num_devices = gpus;
  in.expert = expert;
  in.expert_tensor = expert_tensor;
  in.stages = {moe_stage(expert, expert_tensor)};
  const Cluster c = ClusterBuilder::shorthand(
      1, gpus, *find_gpu_preset("h100-80gb"),
      {"custom", LinkKind::kNvSwitch, 100e9, Time::zero()},
      {"custom", LinkKind::kInfiniBand, 100e9, Time::zero()});
  return simulate(lower(in), c).makespan;
}

TEST(ExpertTensor, TheGatherAndScatterAroundTheExperts) {
  // EP 2 x ETP 2: dispatch, all-gather of the 2 ranks' tokens (2D), experts, reduce-scatter
  // of their outputs (2D), combine; the backward mirrors it.
  const auto p = moe_stage(2, 2).layers.front().pieces;
  ASSERT_EQ(p.size(), 3u);
  using K = TpCollective::Kind;
  EXPECT_EQ(p[0].forward_after.kind, K::kAllToAll);
  EXPECT_EQ(p[0].forward_after.bytes, 200'000'000);
  EXPECT_EQ(p[0].forward_then.kind, K::kAllGather);
  EXPECT_EQ(p[0].forward_then.group, CollectiveGroup::kExpertTensor);
  EXPECT_EQ(p[0].forward_then.bytes, 400'000'000);
  EXPECT_EQ(p[1].forward_after.kind, K::kReduceScatter);
  EXPECT_EQ(p[1].forward_then.kind, K::kAllToAll);
  EXPECT_EQ(p[1].backward_after.kind, K::kReduceScatter);
  EXPECT_EQ(p[1].backward_then.kind, K::kAllToAll);
  EXPECT_EQ(p[2].backward_after.kind, K::kAllToAll);
  EXPECT_EQ(p[2].backward_then.kind, K::kAllGather);
  // Without expert ranks (EP 1) no all-to-all: the gather and scatter come first.
  const auto q = moe_stage(1, 2).layers.front().pieces;
  EXPECT_EQ(q[0].forward_after.kind, K::kAllGather);
  EXPECT_EQ(q[0].forward_then.bytes, 0);
  EXPECT_EQ(q[1].forward_after.kind, K::kReduceScatter);
  EXPECT_EQ(q[1].forward_then.bytes, 0);
  EXPECT_EQ(q[2].backward_after.kind, K::kAllGather);
}

TEST(ExpertTensor, HandWorkedStep) {
  // ETP 2 over 2 GPUs: the ring all-gather of 2D = 400 MB sends each rank's 200 MB to the
  // other, 2 ms at 100 GB/s, and so does the reduce-scatter. Forward 1 + 2 + 2 + 2 + 1 =
  // 8 ms, backward 2 + 2 + 4 + 2 + 2 = 12 ms: 20 ms.
  EXPECT_EQ(moe_makespan(2, 1, 2), Time::ms(20));
  // EP 2 x ETP 2 over 4 GPUs (expert groups {0, 2} and {1, 3}, expert-tensor groups {0, 1}
  // and {2, 3}): each all-to-all sends half of D, 1 ms, on top: forward 1 + 1 + 2 + 2 + 2 +
  // 1 + 1 = 10 ms, backward 2 + 1 + 2 + 4 + 2 + 1 + 2 = 14 ms: 24 ms.
  EXPECT_EQ(moe_makespan(4, 2, 2), Time::ms(24));
  // The same 4 GPUs at EP 4 (ETP 1): the all-to-all sends 3/4 of D, 1.5 ms each way:
  // 4 + 3 + 8 + 3 = 18 ms.
  // (The three flows out of each port share it: a few picoseconds of rounding.)
  EXPECT_NEAR(static_cast<double>(moe_makespan(4, 4, 1).ps_count()), 18e9, 10);
}

// An expert's GEMMs at ETP e: e times the rows (the gathered tokens) and 1/e of the width,
// so the same FLOPs per rank; where they are compute-bound, the same time.
TEST(ExpertTensor, SplitExpertsKeepEachRanksFlops) {
  TransformerShape t;
  t.layers = 1;
  t.hidden = 4096;
  t.heads = 32;
  t.sequence = 4096;
  t.vocab = 1000;
  t.experts = 8;
  t.top_k = 2;
  t.expert_ffn = 14336;
  t.mlp = TransformerShape::Mlp::kSwiglu;
  const Layer x = transformer_model(t, test::mixed(1), *find_gpu_preset("h100-80gb")).layers[1];
  const auto experts = [&x](int ep, int etp) {
    const Layer l = x.at_tensor_degree(1, ep, 1, etp);
    Time sum;
    double flops = 0;
    for (const LayerPiece& p : l.pieces)
      if (p.kind == PieceKind::kExperts) sum += p.forward + p.backward_input + p.backward_weight;
    for (const OpCost& op : x.rank_ops(1, ep, 1, false, etp))
      if (op.name.find("expert_") != std::string::npos) flops += op.flops;
    return std::pair{sum, flops};
  };
  const auto one = experts(8, 1);
  const auto two = experts(4, 2);
  EXPECT_DOUBLE_EQ(two.second, one.second);
  EXPECT_EQ(two.first, one.first);
}

// Each piece of a routed expert's GEMM reads its own expert's weights once. On a GPU at
// efficiency 1 with E = 4 experts over EP 4, one rank's expert_fc1 (h = 1024 to F = 4096,
// 16-bit) on the 32 routed copies of b s = 16 tokens at k = 2 is one piece:
//   FLOPs 2 x 32 x 1024 x 4096 = 268.4 MFLOP, 0.271 us at 989 TFLOP/s;
//   bytes 2 x (32 x 1024 + 32 x 4096) + 2 x 1024 x 4096 = 8,716,288, 2.602 us at 3.35 TB/s:
// memory-bound, 2.602 us forward. (Reading all four experts' weights would be 4x.)
TEST(ExpertTensor, EachPieceReadsOneExpertsWeights) {
  TransformerShape t;
  t.layers = 1;
  t.hidden = 1024;
  t.heads = 8;
  t.sequence = 16;
  t.vocab = 1000;
  t.experts = 4;
  t.top_k = 2;
  t.expert_ffn = 4096;
  GpuSpec gpu = *find_gpu_preset("h100-80gb");
  gpu.efficiency = 1.0;
  const Layer x = transformer_model(t, test::mixed(1), gpu).layers[1];
  Time fc1;
  for (const OpCost& op : x.rank_ops(1, 4, 1, false))
    if (op.name == "expert_fc1") fc1 = op.forward;
  const double bytes = 2.0 * (32 * 1024 + 32 * 4096) + 2.0 * 1024 * 4096;
  EXPECT_NEAR(fc1.seconds(), bytes / gpu.hbm_bytes_per_s, 1e-12);
}

int64_t resident(const test::SimRun& r) {
  const MemBreakdown& m = r.graph.static_memory(0);
  return m[static_cast<int>(MemCategory::kWeights)] +
         m[static_cast<int>(MemCategory::kGradients)] +
         m[static_cast<int>(MemCategory::kOptimizer)];
}

// The experts' state is sharded over expert x expert-tensor ranks: at EP 2 x ETP 2 each GPU
// keeps a quarter (mixed Adam: 16 bytes a parameter), as at EP 4; each MoE layer gathers and
// scatters over the expert-tensor pairs (one transfer each way per pass: forward, backward).
TEST(ExpertTensor, ExpertStateIsShardedOverBothDegrees) {
  const test::SimRun one = test::run_yaml(test::moe_scenario("data: 4"));
  const test::SimRun split = test::run_yaml(test::moe_scenario("data: 4, expert: 2, expert_tensor: 2"));
  const test::SimRun ep4 = test::run_yaml(test::moe_scenario("data: 4, expert: 4"));
  int64_t experts = 0;
  for (const Layer& l : one.scenario.model.layers)
    if (l.moe) experts += l.moe->expert_params;
  EXPECT_EQ(resident(one) - resident(split), 16 * (experts - experts / 4));
  EXPECT_EQ(resident(split), resident(ep4));
  int gathers = 0, scatters = 0, a2a = 0;
  for (const Op& op : split.graph.ops()) {
    gathers += op.comm == CommKind::kAllGather;
    scatters += op.comm == CommKind::kReduceScatter;
    a2a += op.comm == CommKind::kAllToAll;
  }
  // 2 layers x 2 micro-batches x 4 GPUs x (1 forward + 1 backward) x 1 peer.
  EXPECT_EQ(gathers, 2 * 2 * 4 * 2);
  EXPECT_EQ(scatters, 2 * 2 * 4 * 2);
  EXPECT_EQ(a2a, 2 * 2 * 4 * 4);  // dispatch and combine, both passes, 1 peer
  EXPECT_NE(split.report.info.layout.find("ETP 2"), std::string::npos);
}

// Under ZeRO-1 the updated weights are gathered once: the dense ones over the data-parallel
// copies, the routed experts over their expert-data-parallel group (add_expert_reduction),
// not again with the dense ones. Data 4, EP 2, 16-bit weights: a ring of 4 moves 3 x the
// dense bytes, each of the two expert groups (2 members) 1 x its half of the experts.
TEST(ExpertTensor, ExpertsAreGatheredOnce) {
  const test::SimRun r = test::run_yaml(test::moe_scenario("data: 4, expert: 2, zero: 1"));
  int64_t dense = 0, experts = 0;
  for (const Layer& l : r.scenario.model.layers) {
    const int64_t e = l.moe ? l.moe->expert_params : 0;
    dense += l.params - e;
    experts += e;
  }
  int64_t gathered = 0;
  for (const Op& op : r.graph.ops())
    if (op.kind == OpKind::kTransfer && op.comm == CommKind::kAllGather) gathered += op.bytes;
  EXPECT_EQ(gathered, 3 * (2 * dense) + 2 * (2 * experts / 2));
}

// Megatron-Core's expert-data-parallel group: the members holding the same experts (member
// index alike modulo EP x ETP), tensor ranks included. One stage of 200 M expert parameters
// (2-byte gradients: S = 400 MB), TP 2 x 2 copies, EP 1: every GPU holds all the experts
// and sees its own sequence shard's tokens, so their gradients are summed over all 4 GPUs:
// a ring of 4 on a 100 GB/s switch, 2 x 3 steps of S / 4 (1 ms each): 6 ms after the
// forward (1 ms / 2 ranks) and backward (2 ms / 2): 7.5 ms. (Over each tensor rank's 2
// copies alone it would be 2 steps of S / 2: 5.5 ms.)
TEST(ExpertTensor, ExpertGradientsReduceOverTheExpertDataGroup) {
  LoweringInput in = test::two_copies_gpipe();
  in.placement = std::make_shared<const Placement>(Placement{{{0, 1}}, {{2, 3}}});
  in.num_devices = 4;
  in.tensor = {2};
  in.gradient_bytes_per_param = 2;
  StageProfile p;
  StageProfile::LayerCost lc;
  lc.forward = test::ms(1);
  lc.backward_input = test::ms(2);
  lc.params = lc.expert_params = 200'000'000;
  p.layers = {lc};
  p.forward = lc.forward;
  p.backward_input = lc.backward_input;
  p.params = p.expert_params = lc.params;
  in.stages = {p};
  const Cluster c = ClusterBuilder::shorthand(
      1, 4, *find_gpu_preset("h100-80gb"), {"custom", LinkKind::kNvSwitch, 100e9, Time::zero()},
      {"custom", LinkKind::kInfiniBand, 100e9, Time::zero()});
  EXPECT_EQ(simulate(lower(in), c).makespan, test::ms(7.5));
}

// The planner keeps the scenario's expert_tensor: every candidate carries it, in layouts
// whose tensor x data x context it divides (with the expert degree), and its strategy runs
// to the time the planner reported.
TEST(ExpertTensor, ThePlannerKeepsTheScenariosExpertTensorDegree) {
  const std::string file = test::write_temp("etp-plan.yaml", R"(
cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 8, intra_node: nvswitch3}
model: {generator: transformer, layers: 8, hidden: 1024, heads: 8, sequence: 1024, vocab: 32000,
        experts: 16, top_k: 2, expert_ffn: 4096, mlp: swiglu, norm: rmsnorm, position: rotary,
        flash_attention: true}
training: {global_batch: 32, micro_batch: 1, precision: bf16, optimizer: adam}
strategy: {schedule: dapple, pipeline: 1, data: 8, expert_tensor: 2}
)");
  PlanOptions o;
  o.threads = 2;
  const Plan p = plan(file, {}, o);
  ASSERT_FALSE(p.candidates.empty());
  std::vector<Candidate> all = p.candidates;
  all.insert(all.end(), p.pareto.begin(), p.pareto.end());
  for (const Candidate& c : all) {
    EXPECT_EQ(c.point.expert_tensor, 2);
    EXPECT_EQ(c.strategy["expert_tensor"], 2);
    EXPECT_EQ((c.point.data * c.point.context * c.point.tensor) % (c.point.expert * 2), 0);
  }
  const Candidate& best = p.candidates.front();
  std::vector<Override> again{{"strategy", best.strategy.dump()}};
  if (best.micro_batch) again.push_back({"training.micro_batch", std::to_string(*best.micro_batch)});
  const Scenario s = load_scenario_file(file, again);
  EXPECT_NEAR(simulate(scenario_task_graph(s), s.cluster).makespan.seconds(), best.makespan_s,
              1e-9);
}

TEST(ExpertTensor, StrategyChecks) {
  const auto error = test::moe_error;
  EXPECT_NE(error("data: 4, expert: 4, expert_tensor: 2").find("expert x expert-tensor"),
            std::string::npos);
  EXPECT_NE(error("data: 4, expert_tensor: 2, zero: 2").find("not modelled"), std::string::npos);
  EXPECT_EQ(error("data: 4, expert_tensor: 4"), "");
  // The experts are 512 wide: not 3 equal column blocks (said before the ranks' count).
  EXPECT_NE(error("data: 4, expert_tensor: 3").find("equal column blocks"), std::string::npos);
  EXPECT_EQ(error("data: 2, tensor: 2, sequence_parallel: true, expert: 2, expert_tensor: 2"),
            "");
  try {
    load_scenario_text(
        "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 2}\n"
        "model: {generator: transformer, layers: 2, hidden: 256, heads: 4, sequence: 128, "
        "vocab: 1000}\ntraining: {global_batch: 8, micro_batch: 1}\n"
        "strategy: {schedule: 1f1b, pipeline: 1, data: 2, expert_tensor: 2}\n",
        "dense.yaml");
    ADD_FAILURE() << "expert_tensor on a dense model";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no mixture-of-experts"), std::string::npos);
  }
}

}  // namespace
}  // namespace pipesim
