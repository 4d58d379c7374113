// Mixture of experts, expert parallelism and context parallelism (SPEC section 9), worked
// by hand: parameter and FLOP counts of a tiny MoE layer, an all-to-all on an idle switch
// and across nodes, a 2-rank ring attention's exposed communication, experts sharded over
// expert ranks, and the routing imbalance.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <random>
#include <tuple>

#include "planner/planner.h"
#include "planner/search.h"
#include "schedules/collectives_a2a.h"
#include "schedules/lower.h"
#include "costs/models.h"
#include "sim/engine.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

using test::mixed;

// h = 64, 4 heads (keys and values 2h wide), GeLU MLP, LayerNorm, learned positions; 4
// routed experts of F = 128, each token visits k = 2; b = 1 sequence of s = 16 tokens.
TransformerShape tiny_moe() {
  TransformerShape t;
  t.layers = 2;
  t.hidden = 64;
  t.heads = 4;
  t.ffn = 256;
  t.sequence = 16;
  t.vocab = 100;
  t.experts = 4;
  t.top_k = 2;
  t.expert_ffn = 128;
  return t;
}

// Per MoE layer:
//   attention  (h + 2h) h + 3h (QKV and biases) + h^2 + h (projection) = 4h^2 + 4h = 16640
//   norms      2 x 2h = 256
//   router     h E = 256
//   experts    E (2hF + F + h) = 4 (16384 + 128 + 64) = 66304
//   total      83456
// Forward FLOPs: QKV 2bsh(3h) = 393216, scores and values 4bs^2h = 65536, projection
// 2bsh^2 = 131072, router 2bshE = 8192, the k visited experts 4bsh(kF) = 1048576:
// 1646592.
TEST(Experts, TinyMoeLayerParamsAndFlops) {
  const Model m = transformer_model(tiny_moe(), mixed(1), *find_gpu_preset("h100-80gb"));
  ASSERT_EQ(m.layers.size(), 4u);  // embedding, two MoE layers, head
  const Layer& x = m.layers[1];
  ASSERT_TRUE(x.moe.has_value());
  EXPECT_EQ(x.params, 83456);
  EXPECT_EQ(x.moe->expert_params, 66304);
  EXPECT_DOUBLE_EQ(x.forward_flops, 1646592.0);
  // The dispatch moves b s k h 16-bit elements: 16 x 2 x 64 x 2 bytes.
  EXPECT_EQ(x.moe->dispatch_bytes, 4096);
}

// moe_every and dense_first pick the MoE layers: with dense_first 1 and moe_every 2 of 5
// layers, layers 1 and 3 (model layers 2 and 4 after the embedding).
TEST(Experts, DenseFirstAndMoeEvery) {
  TransformerShape t = tiny_moe();
  t.layers = 5;
  t.dense_first = 1;
  t.moe_every = 2;
  const Model m = transformer_model(t, mixed(1), *find_gpu_preset("h100-80gb"));
  std::vector<bool> moe;
  for (size_t i = 1; i + 1 < m.layers.size(); ++i) moe.push_back(m.layers[i].moe.has_value());
  EXPECT_EQ(moe, (std::vector<bool>{false, true, false, true, false}));
}

// One expert that every token visits is the dense MLP: its GEMMs and activation cost what
// the dense layer's do (the router, permutation and un-permutation come on top).
TEST(Experts, OneExpertIsTheDenseMlp) {
  const GpuSpec gpu = *find_gpu_preset("h100-80gb");
  TransformerShape dense = tiny_moe();
  dense.experts = 0;
  dense.ffn = 4096;
  dense.hidden = 1024;
  dense.heads = 8;
  dense.sequence = 2048;
  TransformerShape one = dense;
  one.experts = 1;
  one.top_k = 1;
  one.expert_ffn = 0;  // the dense MLP's width
  const Layer d = transformer_model(dense, mixed(2), gpu).layers[1];
  const Layer e = transformer_model(one, mixed(2), gpu).layers[1];
  const auto time_of = [](const Layer& l, const std::string& name) {
    for (const OpCost& op : l.ops)
      if (op.name == name) return op.forward + op.backward_input + op.backward_weight;
    ADD_FAILURE() << "no op " << name;
    return Time::zero();
  };
  EXPECT_EQ(time_of(d, "fc1"), time_of(e, "expert_fc1"));
  EXPECT_EQ(time_of(d, "gelu"), time_of(e, "expert_gelu"));
  EXPECT_EQ(time_of(d, "fc2"), time_of(e, "expert_fc2"));
}

// h = 1024, 8 heads, 8 routed experts of F = 512 (k = 2), on s tokens.
TransformerShape eight_experts(int64_t s) {
  TransformerShape t = tiny_moe();
  t.hidden = 1024;
  t.heads = 8;
  t.sequence = s;
  t.experts = 8;
  t.expert_ffn = 512;
  return t;
}

// Under fp8 the grouped expert GEMMs keep their inputs' fp8 copies, as the dense GEMMs do
// (Transformer Engine's GroupedLinear saves its quantized inputs for the weight gradient).
// h = 1024, s = 2048, b = 1, k = 2 of 8 experts of F = 512, GeLU, no shared expert: fp8
// keeps 1 byte instead of 2 for the QKV and projection inputs (2 sbh = 4,194,304 bytes),
// the permuted tokens (k sbh = 4,194,304) and the experts' fc2 inputs (k sbF = 2,097,152):
// 10,485,760 bytes less than the 16-bit layer. A shared expert of the same width adds the
// fp8 copy of the normed input it reads beside the router (+sbh = 2,097,152) and keeps its
// own fc2 input in fp8 (-sbF = 1,048,576).
TEST(Experts, Fp8ExpertsKeepTheirInputsInFp8) {
  const TransformerShape t = eight_experts(2048);
  const GpuSpec gpu = *find_gpu_preset("h100-80gb");
  Training fp8 = mixed(1);
  fp8.precision = Precision::kFp8;
  const auto activation = [&](const TransformerShape& shape, const Training& tr) {
    return transformer_model(shape, tr, gpu).layers[1].activation_bytes;
  };
  EXPECT_EQ(activation(t, mixed(1)) - activation(t, fp8), 10'485'760);
  TransformerShape shared = t;
  shared.shared_experts = 1;
  const int64_t shared_mixed = activation(shared, mixed(1)) - activation(t, mixed(1));
  const int64_t shared_fp8 = activation(shared, fp8) - activation(t, fp8);
  EXPECT_EQ(shared_fp8 - shared_mixed, 2'097'152 - 1'048'576);
}

// Expert parallelism keeps each GPU's compute (its tokens' k experts) but with more tokens
// per expert GEMM: never slower, and the same FLOPs. E = 8 experts of F = 512 at k = 2 on
// b s = 4096 tokens: 1024 rows per expert at EP 1, 8192 at EP 8 (one expert per rank).
TEST(Experts, ExpertParallelGemmsAreLargerAndNoSlower) {
  const TransformerShape t = eight_experts(4096);
  const Layer x = transformer_model(t, mixed(1), *find_gpu_preset("h100-80gb")).layers[1];
  const Layer ep8 = x.at_tensor_degree(1, 8);
  const auto experts = [](const Layer& l) {
    Time sum;
    for (const LayerPiece& p : l.pieces)
      if (p.kind == PieceKind::kExperts) sum += p.forward;
    return sum;
  };
  EXPECT_LT(experts(ep8), experts(x));
  EXPECT_EQ(ep8.forward - experts(ep8), x.forward - experts(x));  // the rest is the same
}

// The busiest expert rank sets the pace: routing_imbalance 1.5 stretches the experts' time
// by half again and nothing else; a capacity factor of 1.25 caps it there.
TEST(Experts, RoutingImbalanceStretchesTheExperts) {
  TransformerShape t = tiny_moe();
  t.layers = 1;
  const Model m = transformer_model(t, mixed(1), *find_gpu_preset("h100-80gb"));
  const std::vector<StageSpec> one{{0, 2, 1, {}, {}, {}}};
  Time experts;
  for (const LayerPiece& p : m.layers[1].pieces)
    if (p.kind == PieceKind::kExperts) experts = p.forward;
  const auto forward = [&](double imbalance) {
    GroupDegrees g;
    g.routing_imbalance = imbalance;
    return stage_profiles(m, one, {}, {}, false, g)[0].forward;
  };
  const Time base = forward(1.0);
  const Time slow = forward(1.5);
  EXPECT_NEAR(static_cast<double>((slow - base).ps_count()),
              0.5 * static_cast<double>(experts.ps_count()), 2.0);
  t.capacity_factor = 1.25;
  const Model capped = transformer_model(t, mixed(1), *find_gpu_preset("h100-80gb"));
  GroupDegrees g;
  g.routing_imbalance = 1.5;
  const Time c = stage_profiles(capped, one, {}, {}, false, g)[0].forward;
  EXPECT_NEAR(static_cast<double>((c - base).ps_count()),
              0.25 * static_cast<double>(experts.ps_count()), 2.0);
}

// DeepSeek-V3's multi-token-prediction depth (model.mtp_layers): three layers after the
// head. Its input holds the [2h -> h] projection and two RMSNorms, 2h^2 + 2h parameters,
// and 2 S (2h) h FLOPs; its block is a MoE layer (layer 61 would be one); its head has only
// its final norm and keeps the main head's copy where the head is elsewhere; a stage keeps
// one copy of a tied owner's weights however many of its layers read them. With it the
// model is DeepSeek-AI's 671 B + 14 B of the released checkpoint less the module's own
// embedding and head the checkpoint stores (2 V h, shared here), within 0.5 %.
TEST(Experts, MultiTokenPredictionAddsItsLayersAfterTheHead) {
  const Scenario s = load_scenario_text(
      "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 2}\n"
      "model: {include: deepseek-v3, mtp_layers: 1}\n"
      "training: {global_batch: 2, micro_batch: 1, precision: bf16}\n"
      "strategy: {schedule: dapple, stages: [{layers: 0-61}, {layers: 62-65}]}\n",
      "mtp.yaml");
  const std::vector<Layer>& l = s.model.layers;
  ASSERT_EQ(l.size(), 66u);  // embedding, 61 blocks, head, the depth's three
  const double h = 7168, S = 4096;
  EXPECT_EQ(l[63].name, "mtp0_in");
  EXPECT_EQ(l[63].params, static_cast<int64_t>(2 * h * h + 2 * h));
  EXPECT_DOUBLE_EQ(l[63].forward_flops, 2 * S * 2 * h * h);
  EXPECT_EQ(l[64].name, "mtp0");
  ASSERT_TRUE(l[64].moe.has_value());
  EXPECT_EQ(l[64].params, l[61].params);
  EXPECT_EQ(l[65].name, "mtp0_head");
  EXPECT_EQ(l[65].params, static_cast<int64_t>(h));
  EXPECT_EQ(l[65].forward_flops, l[62].forward_flops);
  // The second stage holds the head: no copy of its weights; it holds no embedding: one.
  EXPECT_EQ(
      s.model.stage_params(62, 65) - (l[62].params + l[63].params + l[64].params + l[65].params),
      static_cast<int64_t>(129280 * h));
  double params = 0;
  for (const Layer& x : l) params += static_cast<double>(x.params);
  const double V = 129280;
  EXPECT_NEAR(params, 685e9 - 2 * V * h, 0.005 * (685e9 - 2 * V * h));
  // The head passes the last block's hidden state on to the depth (a cut there sends it).
  EXPECT_EQ(l[62].output_bytes, l[61].output_bytes);
  EXPECT_EQ(l[65].output_bytes, 0);
  // Two depths, the stage after the head: one copy of the embedding for both inputs and
  // one of the head for both heads.
  const Scenario two = load_scenario_text(
      "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 2}\n"
      "model: {include: deepseek-v3, mtp_layers: 2}\n"
      "training: {global_batch: 2, micro_batch: 1, precision: bf16}\n"
      "strategy: {schedule: dapple, stages: [{layers: 0-62}, {layers: 63-68}]}\n",
      "mtp2.yaml");
  int64_t own = 0;
  for (int k = 63; k <= 68; ++k) own += two.model.layers[static_cast<size_t>(k)].params;
  EXPECT_EQ(two.model.stage_params(63, 68) - own, static_cast<int64_t>(2 * V * h));
  EXPECT_FALSE(l[63].recomputed);
  EXPECT_TRUE(l[64].recomputed);
  EXPECT_FALSE(l[65].recomputed);
}

// Published counts (SPEC: totals within 0.5 %), total and active per token: Mixtral 8x7B 46.7 B
// and 12.9 B (arXiv 2401.04088, section 2), Mixtral 8x22B 141 B and 39 B (Mistral AI's
// announcement), DeepSeek-V3 671 B and 37 B (arXiv 2412.19437, section 1), Qwen3-30B-A3B 30.5 B
// and 3.3 B, Qwen3-235B-A22B 235 B and 22 B (arXiv 2505.09388, Table 2). Active: all but the routed
// experts a token does not visit, (E - k) / E of them.
TEST(Experts, PresetParameterCountsWithinHalfAPercent) {
  const std::tuple<const char*, double, double> presets[] = {
      {"mixtral-8x7b", 46.7e9, 12.9e9},
      {"mixtral-8x22b", 141e9, 39e9},
      {"deepseek-v3", 671e9, 37e9},
      {"qwen3-30b-a3b", 30.5e9, 3.3e9},
      {"qwen3-235b-a22b", 235e9, 22e9}};
  for (const auto& [name, total, active] : presets) {
    const Scenario s = load_scenario_text(
        std::string("cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 1}\nmodel: {include: ") +
            name +
            "}\ntraining: {global_batch: 1, micro_batch: 1, precision: bf16}\n"
            "strategy: {schedule: dapple, pipeline: 1}\n",
        "preset.yaml");
    double params = 0, idle = 0;
    for (const Layer& l : s.model.layers) {
      params += static_cast<double>(l.params);
      if (l.moe)
        idle += static_cast<double>(l.moe->expert_params) * (l.moe->experts - l.moe->top_k) /
                l.moe->experts;
    }
    EXPECT_NEAR(params, total, 0.005 * total) << name;
    // Active counts are published to two or three digits, with the embeddings counted or not
    // (Mixtral's 12.9 B holds both tables; DeepSeek-V3's 37 B lies between ours without the
    // input table, 36.6 B, and with it, 37.6 B): within 2 %.
    EXPECT_NEAR(params - idle, active, 0.02 * active) << name;
  }
}

// No latency; 10 ps a byte (100 GB/s) on each GPU's NVSwitch port or NVLink, 100 ps a byte
// (10 GB/s) on each GPU's network port.
constexpr double kIn = 100e9, kNet = 10e9;

struct A2a {
  Time makespan;
  int64_t sent = 0, received = 0;
};
A2a run_a2a(const Cluster& c, int64_t bytes) {
  TaskGraphBuilder b(c.num_devices());
  std::vector<CollectiveMember> members;
  std::vector<OpId> done;
  for (int d = 0; d < c.num_devices(); ++d) {
    Op wait;
    wait.device = d;
    done.push_back(b.add(wait));  // an empty op each member's result feeds
    members.push_back({d, c.device(d).node, {}, done.back()});
  }
  add_all_to_all(b, members, bytes, {0, 0});
  const TaskGraph g = std::move(b).build();
  EXPECT_FALSE(g.validate().has_value());
  const Timeline tl = simulate(g, c);
  A2a out{tl.makespan, 0, 0};
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::kTransfer) continue;
    out.sent += op.bytes;
  }
  for (const LinkStats& l : tl.links) out.received += l.bytes;
  return out;
}

// 8 GPUs on one NVSwitch, S = 80 MB each: every GPU sends S/8 = 10 MB to each of the 7
// others at once, 70 MB through its 100 GB/s port (and receives 70 MB through it): 700 us.
// Everything sent arrives: 7 S in all, each byte over two links (up to the switch, down).
TEST(Experts, AllToAllOnAnIdleSwitch) {
  const Cluster c = ClusterBuilder::shorthand(
      1, 8, *find_gpu_preset("h100-80gb"), {"custom", LinkKind::kNvSwitch, kIn, Time::zero()},
      {"custom", LinkKind::kInfiniBand, kNet, Time::zero()});
  const A2a r = run_a2a(c, 80'000'000);
  EXPECT_NEAR(static_cast<double>(r.makespan.ps_count()), 700e6, 10);  // (rounding up)
  EXPECT_EQ(r.sent, 7 * 80'000'000);
  EXPECT_EQ(r.received, 2 * 7 * 80'000'000);
}

// 2 nodes x 4 GPUs, one network port per GPU (rail-optimized). Each member sends S/8 to its 3
// node peers over NVLink (10 MB each, 100 us) and, for the 4 members of the other node,
// 4 S/8 = 40 MB to its rail peer there through its port: 4 ms, the network sets the time.
TEST(Experts, AllToAllAcrossNodesRidesTheRails) {
  ClusterBuilder::ShorthandOptions o;
  o.nics = 4;
  const Cluster c = ClusterBuilder::shorthand(
      2, 4, *find_gpu_preset("h100-80gb"), {"custom", LinkKind::kNvLink, kIn, Time::zero()},
      {"custom", LinkKind::kInfiniBand, kNet, Time::zero()}, o);
  const A2a r = run_a2a(c, 80'000'000);
  EXPECT_NEAR(static_cast<double>(r.makespan.ps_count()), 4e9, 10);
  EXPECT_EQ(r.sent, 7 * 80'000'000);
}

// The same under a deduplicating dispatcher (expert_dispatch: flex), 8 experts one per GPU,
// each token routed to k = 2. To one GPU a member sends the tokens that pick its expert:
// S/2 tokens' worth x (1 - C(7,2)/C(8,2)) = S/2 x 1/4 = S/8, as before (a token cannot pick
// one expert twice). To the other node (4 experts) it sends each token picking any of them
// once: S/2 x (1 - C(4,2)/C(8,2)) = S/2 x 22/28 = 31.43 MB instead of 40 MB: 3.143 ms.
TEST(Experts, DeduplicatingDispatchSendsATokenOncePerNode) {
  ClusterBuilder::ShorthandOptions o;
  o.nics = 4;
  const Cluster c = ClusterBuilder::shorthand(
      2, 4, *find_gpu_preset("h100-80gb"), {"custom", LinkKind::kNvLink, kIn, Time::zero()},
      {"custom", LinkKind::kInfiniBand, kNet, Time::zero()}, o);
  TaskGraphBuilder b(c.num_devices());
  std::vector<CollectiveMember> members;
  for (int d = 0; d < c.num_devices(); ++d) members.push_back({d, c.device(d).node, {}, UINT32_MAX});
  add_all_to_all(b, members, 80'000'000, {0, 0}, {2, 8});
  const TaskGraph g = std::move(b).build();
  int64_t across = 0;
  for (const Op& op : g.ops())
    if (c.device(op.device).node != c.device(op.peer).node) across += op.bytes;
  EXPECT_EQ(across, 8 * 31'428'572);  // 80 MB / 2 x 22 / 28, rounded up
  EXPECT_NEAR(static_cast<double>(simulate(g, c).makespan.ps_count()), 3.142857e9, 200);
}

// Ring attention on 2 context ranks (one GPU each, 100 GB/s NVLink, no latency), one stage
// and one micro-batch under GPipe. Per micro-batch the layer's parts take 2, 4 and 2 ms
// forward (before the core, the core, after it) and twice that backward; each rank runs
// half: 1 + 2 + 1 ms and 2 + 4 + 2 ms. The keys and values (K bytes gathered) go round the
// ring beside the core: one step of K / 2 each way, forward, and of 2K / 2 backward (their
// gradients travel too).
//   K = 600 MB: 3 ms beside a 2 ms core, 6 ms beside a 4 ms core: forward 1 + 3 + 1 = 5 ms,
//     backward 2 + 6 + 2 = 10 ms: 15 ms, of which 1 + 2 = 3 ms exposed communication.
//   K = 100 MB: 1 ms and 2 ms, hidden: 4 + 8 = 12 ms.
Time ring_attention_makespan(int64_t kv) {
  LoweringInput in = test::two_copies_gpipe();
  in.context = 2;
  StageProfile p;
  p.pieces = true;
  StageProfile::LayerCost lc;
  const auto piece = [](double f, double b) {
    StageProfile::LayerCost::Piece x;
    x.forward = test::ms(f);
    x.backward_input = test::ms(b);
    return x;
  };
  lc.pieces = {piece(2, 4), piece(4, 8), piece(2, 4)};
  lc.pieces[1].forward_beside = {TpCollective::Kind::kAllGather, kv, Time::zero(),
                                 CollectiveGroup::kContext};
  lc.pieces[1].backward_beside = {TpCollective::Kind::kAllGather, 2 * kv, Time::zero(),
                                  CollectiveGroup::kContext};
  lc.forward = test::ms(8);
  lc.backward_input = test::ms(16);
  p.layers = {lc};
  p.forward = lc.forward;
  p.backward_input = lc.backward_input;
  in.stages = {p};
  return simulate(lower(in), test::two_gpus(kIn)).makespan;
}

TEST(Experts, RingAttentionExposesWhatTheCoreCannotHide) {
  EXPECT_EQ(ring_attention_makespan(600'000'000), Time::ms(15));
  EXPECT_EQ(ring_attention_makespan(100'000'000), Time::ms(12));
}

// Experts' weights, gradients and optimizer state are sharded over the expert ranks: at EP
// 4 each GPU keeps a quarter of them (mixed Adam: 2 + 2 + 12 bytes a parameter), the rest
// whole.
TEST(Experts, ExpertStateIsShardedOverExpertRanks) {
  const test::SimRun one = test::run_yaml(test::moe_scenario("data: 4"));
  const test::SimRun four = test::run_yaml(test::moe_scenario("data: 4, expert: 4"));
  int64_t experts = 0;
  for (const Layer& l : one.scenario.model.layers)
    if (l.moe) experts += l.moe->expert_params;
  ASSERT_GT(experts, 0);
  const auto resident = [](const test::SimRun& r) {
    const MemBreakdown& m = r.graph.static_memory(0);
    return m[static_cast<int>(MemCategory::kWeights)] +
           m[static_cast<int>(MemCategory::kGradients)] +
           m[static_cast<int>(MemCategory::kOptimizer)];
  };
  EXPECT_EQ(resident(one) - resident(four), 16 * (experts - experts / 4));
  // Each MoE layer's forward and backward exchange tokens: 2 layers x 4 all-to-alls per
  // micro-batch on every GPU.
  int a2a_ops = 0;
  for (const Op& op : four.graph.ops()) a2a_ops += op.comm == CommKind::kAllToAll;
  EXPECT_EQ(a2a_ops, 2 * 4 * 2 * 4 * 3);  // x 2 micro-batches x 4 GPUs x 3 peers
  EXPECT_EQ(four.report.info.parallelism.expert, 4);
  // Their waits are reported apart (at least the switch's latency each).
  EXPECT_GT(four.report.devices[0].exposed_all_to_all, Time::zero());
  EXPECT_NE(to_json(four.report).find("\"all_to_all\""), std::string::npos);
  EXPECT_EQ(one.report.devices[0].exposed_all_to_all, Time::zero());
  // Expert ranks may fold in the tensor ranks (Megatron-Core's expert layout, expert_tensor
  // 1): TP 2 x DP 2 as one expert group of 4, each GPU with one expert whole and its sequence
  // shard's tokens to exchange.
  const test::SimRun folded =
      test::run_yaml(test::moe_scenario("data: 2, tensor: 2, sequence_parallel: true, expert: 4"));
  int folded_a2a = 0;
  for (const Op& op : folded.graph.ops()) folded_a2a += op.comm == CommKind::kAllToAll;
  EXPECT_EQ(folded_a2a, 2 * 4 * 4 * 4 * 3);  // (4 micro-batches a copy at data 2)
}

TEST(Experts, StrategyChecks) {
  const auto error = test::moe_error;
  EXPECT_NE(error("data: 4, expert: 3").find("do not spread evenly"), std::string::npos);
  EXPECT_NE(error("data: 2, expert: 4").find("tensor x data x context"), std::string::npos);
  EXPECT_NE(error("data: 4, expert: 2, zero: 2").find("not modelled"), std::string::npos);
  EXPECT_NE(error("data: 2, tensor: 2").find("need sequence parallelism"), std::string::npos);
  EXPECT_NE(error("data: 2, context: 3").find("2 x 3"), std::string::npos);
  EXPECT_EQ(error("data: 2, context: 2, expert: 4"), "");
}

// Settings with nothing to act on are said, not dropped.
TEST(Experts, IdleContextAndExpertSettingsWarn) {
  const test::SimRun r =
      test::run_yaml(test::moe_scenario("data: 4, context_comm: a2a, expert_dispatch: flex"));
  const auto& w = r.report.info.warnings;
  EXPECT_EQ(w.size(), 2u);
  EXPECT_NE(w.at(0).find("context_comm: no effect"), std::string::npos);
  EXPECT_NE(w.at(1).find("expert_dispatch: no effect"), std::string::npos);
}

// Context parallelism splits every op's tokens: at CP 2 each GPU's compute halves (up to the
// ring's exposed time) and each GPU keeps half the activations.
TEST(Experts, ContextRanksSplitTheTokens) {
  const test::SimRun one = test::run_yaml(test::moe_scenario("data: 2"), true);
  const test::SimRun two = test::run_yaml(test::moe_scenario("data: 2, context: 2"), true);
  EXPECT_EQ(two.report.info.parallelism.context, 2);
  const int64_t a1 = test::peak_activation_bytes(one, 0), a2 = test::peak_activation_bytes(two, 0);
  EXPECT_NEAR(static_cast<double>(a2), a1 / 2.0, a1 * 0.01);
  EXPECT_LT(test::device_finish(two, 0), test::device_finish(one, 0));
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

Scenario degrees_scenario(const std::string& model) {
  return load_scenario_text(
      "cluster: {gpu: h100-80gb, nodes: 16, gpus_per_node: 8, intra_node: nvswitch3,\n"
      "          inter_node: {preset: ib-ndr, nics: 8}}\nmodel: " +
          model +
          "\ntraining: {global_batch: 64, micro_batch: 1, precision: bf16}\n"
          "strategy: {schedule: dapple, pipeline: 1}\n",
      "degrees.yaml");
}

// The planner's context degrees: 2-8 for sequences of 8192 tokens and more; expert degrees:
// the largest divisors of E that fit a server (8) and 64 GPUs.
TEST(Experts, PlannerDegrees) {
  EXPECT_EQ(planner::context_degrees(degrees_scenario("{include: llama3-8b, sequence: 16384}")),
            (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(planner::context_degrees(degrees_scenario("{include: llama3-8b, sequence: 4096}")),
            (std::vector<int>{1}));
  EXPECT_EQ(planner::expert_degrees(degrees_scenario("{include: mixtral-8x7b}")),
            (std::vector<int>{1, 8}));
  EXPECT_EQ(planner::expert_degrees(degrees_scenario("{include: qwen3-30b-a3b}")),
            (std::vector<int>{1, 8, 64}));
  EXPECT_EQ(planner::expert_degrees(degrees_scenario("{include: llama3-8b}")),
            (std::vector<int>{1}));
}

// A MoE model whose experts (16 layers x 32 experts x 3 x 1024 x 4096: 6.4 B parameters,
// 103 GB of mixed-precision Adam state) fit 8 GPUs only sharded: the planner's plans that
// use expert parallelism are valid ones (one replica per stage, ZeRO 0 or 1) and what it
// reports for them is what `run` gives for the same strategy. (Here the best plans
// replicate two stages under ZeRO instead; expert parallelism's sit on the front.)
TEST(Experts, PlannerSearchesExpertParallelism) {
  const std::string file = test::write_temp("moe-plan.yaml", R"(
cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 8, intra_node: nvswitch3}
model: {generator: transformer, layers: 16, hidden: 1024, heads: 8, sequence: 1024, vocab: 32000,
        experts: 32, top_k: 2, expert_ffn: 4096, mlp: swiglu, norm: rmsnorm, position: rotary,
        flash_attention: true}
training: {global_batch: 32, micro_batch: 1, precision: bf16, optimizer: adam}
strategy: {schedule: dapple, pipeline: 1, data: 8}
)");
  PlanOptions o;
  o.threads = 2;
  const Plan p = plan(file, {}, o);
  ASSERT_FALSE(p.candidates.empty());
  int with_experts = 0;
  std::vector<Candidate> all = p.candidates;
  all.insert(all.end(), p.pareto.begin(), p.pareto.end());
  for (const Candidate& c : all) {
    if (c.point.expert < 2) continue;
    ++with_experts;
    EXPECT_LE(c.point.zero, 1);
    for (const StageSpec& s : c.point.stages) EXPECT_EQ(s.replicas, 1);
    EXPECT_EQ(c.strategy["expert"], c.point.expert);
  }
  EXPECT_GT(with_experts, 0);
  const auto ep = std::find_if(all.begin(), all.end(),
                               [](const Candidate& c) { return c.point.expert > 1; });
  ASSERT_NE(ep, all.end());
  std::vector<Override> again{{"strategy", ep->strategy.dump()}};
  if (ep->micro_batch) again.push_back({"training.micro_batch", std::to_string(*ep->micro_batch)});
  const Scenario s = load_scenario_file(file, again);
  const TaskGraph g = scenario_task_graph(s);
  const Timeline tl = simulate(g, s.cluster);
  EXPECT_NEAR(tl.makespan.seconds(), ep->makespan_s, 1e-9);
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

// Random small MoE transformers under random tensor x context x pipeline x data layouts,
// expert degrees, context exchanges, dispatchers, shared experts beside the dispatch or not
// and schedules: every device's busy time
// within the makespan, activations back to zero with none negative on the way, bytes sent
// = bytes the links carried, and the same input the same report.
TEST(Experts, RandomLayoutsKeepTheInvariants) {
  std::mt19937 rng(27);
  const auto pick = [&](std::vector<int> v) { return v[rng() % v.size()]; };
  for (int trial = 0; trial < 24; ++trial) {
    const int t = pick({1, 2}), cp = pick({1, 2}), pp = pick({1, 2}), d = pick({1, 2});
    std::vector<int> eps;
    for (const int e : {1, 2, 4, 8})
      if ((t * cp * d) % e == 0) eps.push_back(e);
    const int ep = pick(eps);
    const char* comm = trial % 3 == 0 ? "p2p" : trial % 3 == 1 ? "all-gather" : "a2a";
    const std::string schedule = pp > 1 ? (trial % 2 ? "interleaved" : "1f1b") : "gpipe";
    const std::string yaml = fmt::format(
        "cluster: {{gpu: h100-80gb, nodes: 2, gpus_per_node: 8, intra_node: nvswitch3,\n"
        "          inter_node: {{preset: ib-ndr, nics: {}}}}}\n"
        "model: {{generator: transformer, layers: 4, hidden: 256, heads: 4, sequence: 256,\n"
        "        vocab: 1000, experts: 8, top_k: 2, expert_ffn: 512, mlp: swiglu, norm: rmsnorm,\n"
        "        position: rotary, flash_attention: true, moe_every: {}, shared_experts: {}}}\n"
        "training: {{global_batch: {}, micro_batch: 1, precision: bf16, optimizer: adam}}\n"
        "strategy: {{schedule: {}, pipeline: {}, {}tensor: {}, sequence_parallel: {}, "
        "context: {}, context_comm: {}, data: {}, expert: {}, expert_dispatch: {}, "
        "zero: {}, routing_imbalance: {}, shared_expert_overlap: {}}}\n",
        pick({1, 8}), pick({1, 2}), trial % 4 == 0 ? 0 : 1, 4 * d * pp, schedule, pp,
        schedule == "interleaved" ? "virtual_stages: 2, " : "", t, t > 1 ? "true" : "false", cp,
        comm, d, ep, trial % 2 ? "flex" : "alltoall", pick({0, 1}), pick({1, 2}) == 1 ? 1.0 : 1.3,
        trial % 3 != 2);
    const test::SimRun r = test::run_yaml(yaml, true);
    const Time makespan = r.timeline.makespan;
    for (const DeviceReport& dev : r.report.devices) EXPECT_LE(dev.busy, makespan) << yaml;
    std::map<int, int64_t> act;
    for (const MemoryChange& c : r.timeline.memory_changes) {
      const Op& op = r.graph.op(c.op);
      act[op.device] += c.at_end ? op.mem_at_end : op.mem_at_start;
      ASSERT_GE(act[op.device], 0) << yaml;
    }
    for (const auto& [dev, bytes] : act) EXPECT_EQ(bytes, 0) << yaml;
    int64_t expected = 0;
    for (const Op& op : r.graph.ops()) {
      if (op.kind == OpKind::kTransfer)
        expected += op.bytes * static_cast<int64_t>(
                                   r.scenario.cluster.route(op.device, op.peer).hops.size());
    }
    int64_t carried = 0;
    for (const LinkStats& l : r.timeline.links) carried += l.bytes;
    EXPECT_EQ(carried, expected) << yaml;
    EXPECT_EQ(to_json(r.report), to_json(test::run_yaml(yaml, true).report)) << yaml;
  }
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

// `pipesim model` says how many layers route and what a token visits.
TEST(Experts, ModelCommandSummarisesTheExperts) {
  const std::string file = test::write_temp(
      "mixtral-model.yaml",
      "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 8}\nmodel: {include: mixtral-8x7b}\n"
      "training: {global_batch: 8, micro_batch: 1, precision: bf16}\n"
      "strategy: {schedule: dapple, pipeline: 1, data: 8}\n");
  const test::CliResult r = test::cli({"model", file});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("mixture of experts: 32 MoE layers of 8 experts, top 2; 46.71 B "
                       "parameters, 12.88 B active per token"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace pipesim
