// Tensor collectives beside compute (strategy.tensor_overlap, SPEC section 3.1): Megatron-LM's
// backward all-reduces beside the weight gradients, Transformer Engine's full overlap with
// and without sequence parallelism, each against the times worked by hand.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "scenario/setup.h"
#include "schedules/lower.h"
#include "tests/support.h"
#include "tests/tensor_scenario.h"

namespace pipesim {
namespace {

using test::at_degree;
using test::gpt;
using test::kSbh;

TEST(Tensor, FullOverlapRunsEveryCollectiveBesideTheComputeBeforeItByHand) {
  // `tensor_overlap: full` (Transformer Engine's tp_comm_overlap): each all-reduce is issued
  // when the compute before it starts and the next segment waits for both, so the forward
  // above becomes max(embedding / 2, AR) + max(first half / 2, AR) + max(second / 2, AR)
  // + head / 2 on each rank.
  const test::SimRun r = test::run_yaml(gpt(2, 1, "  tensor_overlap: full\n"));
  const auto layers = at_degree(r.scenario.model.layers, 2);
  auto half = [](Time t) { return Time::ps(t.ps_count() / 2 + t.ps_count() % 2); };
  const Time layer = layers[1].forward + layers[1].tp_whole_forward;
  const Time first = layer / 2, second = layer - layer / 2;
  const Time ar = Cluster::transfer_time(r.scenario.cluster.route(0, 1), kSbh) * 2;
  const Time expect = max(half(layers[0].forward), ar) + max(half(first), ar) +
                      max(half(second), ar) + half(layers[2].forward + layers[2].tp_whole_forward);
  Time f_end;
  for (OpId id : r.graph.stream(0)) {
    const Op& op = r.graph.op(id);
    if (op.kind == OpKind::kForward) f_end = max(f_end, r.timeline.end[id]);
  }
  EXPECT_EQ(f_end, expect);
  // The backward too: shorter than with only the backward's overlap, which is shorter
  // than none.
  const auto span = [](const test::SimRun& x) {
    Time first_b = Time::max(), last;
    for (OpId id : x.graph.stream(0)) {
      const OpKind k = x.graph.op(id).kind;
      if (k == OpKind::kBackward) first_b = std::min(first_b, x.timeline.start[id]);
      if (k == OpKind::kBackward || k == OpKind::kWeightGrad) last = max(last, x.timeline.end[id]);
    }
    return last - first_b;
  };
  const test::SimRun back = test::run_yaml(gpt(2, 1, "  tensor_overlap: backward\n"));
  EXPECT_LT(span(r), span(back));
  EXPECT_LT(r.report.makespan, back.report.makespan);
}

// The parts a generated layer's forward is cut into under `tensor_overlap: full` with
// sequence parallelism (Transformer Engine's userbuffers), on the whole layer's scale
// (each rank runs a part in 1/t of it): each reduce-scatter is pipelined with the GEMM
// producing it in 4 chunks, so it runs beside that GEMM's last 3/4; each all-gather runs
// beside the GEMM it feeds (ring exchange), which waits for the reduce-scatter before it
// (the residual add and the norm read its result):
//   q: ln1 QKV                                            (beside the AG before it)
//   a: core, projection's first 1/4, dropout-add | RS     (waits that AG)
//   b: projection's last 3/4                              (beside RS)
//   c: ln2 fc1                                            (waits RS; beside AG)
//   d: GeLU, fc2's first 1/4, dropout-add | RS            (waits AG)
//   e: fc2's last 3/4                                     (beside RS)
std::vector<Time> full_overlap_parts(const Layer& x) {
  const auto piece = [&](PieceKind k) {
    for (const LayerPiece& p : x.pieces)
      if (p.kind == k) return p;
    ADD_FAILURE() << "no such piece";
    return LayerPiece{};
  };
  const LayerPiece pre = piece(PieceKind::kPreAttention), core = piece(PieceKind::kAttention),
                   post = piece(PieceKind::kPostAttention), mlp = piece(PieceKind::kMlp);
  const auto last_3_4 = [](Time g) { return g - g / 4; };
  const Time b = last_3_4(post.tail_forward), e = last_3_4(mlp.tail_forward);
  EXPECT_EQ(pre.lead_forward, pre.forward);  // ln1 and QKV (learned positions: no rotary)
  return {pre.forward,      core.forward + post.forward - b,    b,
          mlp.lead_forward, mlp.forward - mlp.lead_forward - e, e};
}

// One layer (h = s = 2048) at t = 2 on two A100s with links of `bandwidth`, GPipe, one
// micro-batch, sequence parallelism.
std::string sequence_parallel_layer(const std::string& overlap, const std::string& bandwidth) {
  return fmt::format(R"(cluster: {{gpu: a100-80gb, nodes: 1, gpus_per_node: 2,
  intra_node: {{preset: nvswitch2, bandwidth: {}}}}}
model: {{generator: transformer, layers: 1, hidden: 2048, heads: 16, sequence: 2048, vocab: 32000}}
training: {{global_batch: 1, micro_batch: 1, precision: mixed, optimizer: adam}}
strategy: {{schedule: gpipe, pipeline: 1, tensor: 2, sequence_parallel: true, tensor_overlap: {}}}
)",
                     bandwidth, overlap);
}

Time forward_end(const test::SimRun& x) {
  Time end;
  for (OpId id : x.graph.stream(0)) {
    if (x.graph.op(id).kind == OpKind::kForward) end = max(end, x.timeline.end[id]);
  }
  return end;
}

// That layer under `tensor_overlap: full`: the run, one rank's share of a time (t = 2), one
// step of a collective (latency + sbh / bandwidth) and the layer's parts (full_overlap_parts).
struct SequenceParallelRun {
  test::SimRun r;
  std::vector<Layer> L;
  Time step;
  std::vector<Time> parts;
  static Time half(Time t) { return Time::ps(t.ps_count() / 2 + t.ps_count() % 2); }
};
SequenceParallelRun run_full_overlap(const std::string& bandwidth) {
  SequenceParallelRun x{test::run_yaml(sequence_parallel_layer("full", bandwidth)), {}, {}, {}};
  x.L = at_degree(x.r.scenario.model.layers, 2);
  x.step = Cluster::transfer_time(x.r.scenario.cluster.route(0, 1), int64_t{2048} * 2048);
  x.parts = full_overlap_parts(x.L[1]);
  return x;
}

TEST(Tensor, FullOverlapUnderSequenceParallelismHidesBothHalvesByHand) {
  // Under sequence parallelism each all-reduce is a reduce-scatter then an all-gather, one
  // step each at t = 2. With `tensor_overlap: full` the embedding's reduce-scatter runs
  // beside it, and the layer's collectives beside the GEMMs Transformer Engine pairs them
  // with (full_overlap_parts). Here (links of 600 GB/s) each part outlasts the collective
  // beside it, so the forward on each rank is its parts alone: embedding / 2 + the layer's
  // parts / 2 + head / 2. With `backward` nothing of the forward overlaps: each of its three
  // all-reduces is a reduce-scatter then an all-gather on idle links after its segment, two
  // steps each, six in all.
  const auto [r, L, step, parts] = run_full_overlap("600 GB/s");
  const auto half = SequenceParallelRun::half;
  ASSERT_GT(half(L[0].forward), step);
  ASSERT_GT(half(L[2].forward), step);
  Time segments = half(L[0].forward) + half(L[2].forward);
  for (const Time part : parts) {
    ASSERT_GT(half(part), step);
    segments += half(part);
  }
  EXPECT_EQ(forward_end(r), segments);
  // The layer's time is the same cut in halves (the `backward` run's segments).
  EXPECT_EQ(forward_end(test::run_yaml(sequence_parallel_layer("backward", "600 GB/s"))),
            half(L[0].forward) + half(L[1].forward / 2) + half(L[1].forward - L[1].forward / 2) +
                half(L[2].forward) + step * 6);
}

TEST(Tensor, FullOverlapExposesAReduceScatterLongerThanItsGemmByHand) {
  // The same layer on links of 70 GB/s: one step now outlasts the projection's last 3/4 on
  // a rank (part b) but no other part. Nothing else is on the link while it runs (the
  // embedding's all-gather ran beside part q), so ln2 and fc1 (part c) start when it ends:
  // the forward is the parts' times plus (step - b / 2), the embedding's and the head's
  // parts at least a step (each runs beside one).
  const auto [r, L, step, parts] = run_full_overlap("70 GB/s");
  const auto half = SequenceParallelRun::half;
  ASSERT_LT(half(parts[2]), step);
  Time expect = max(half(L[0].forward), step) + max(half(L[2].forward), step) + step;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i == 2) continue;
    ASSERT_GT(half(parts[i]), step) << i;
    expect += half(parts[i]);
  }
  EXPECT_EQ(forward_end(r), expect);
}

TEST(Tensor, FullOverlapAllGathersFollowTheOnesThatFedTheirSegment) {
  // Links slow enough that every collective outlasts the compute beside it. A segment that
  // ran beside the all-gather feeding it cannot have produced its output before that
  // gather is in, so the all-gather issued after it (of its reduce-scatter) starts only
  // once the feeding one has ended: device 0's all-gather sends never overlap each other.
  const test::SimRun r = test::run_yaml(R"(cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 4,
  intra_node: {preset: nvswitch2, bandwidth: 20 GB/s}}
model: {generator: transformer, layers: 2, hidden: 2048, heads: 16, sequence: 4096, vocab: 32000, flash_attention: true}
training: {global_batch: 1, micro_batch: 1, precision: bf16, optimizer: adam}
strategy: {schedule: gpipe, pipeline: 1, tensor: 4, sequence_parallel: true, tensor_overlap: full}
)");
  std::vector<std::pair<Time, Time>> gathers;
  for (OpId id = 0; id < r.graph.size(); ++id) {
    const Op& op = r.graph.op(id);
    if (op.comm == CommKind::kAllGather && op.device == 0)
      gathers.emplace_back(r.timeline.start[id], r.timeline.end[id]);
  }
  std::sort(gathers.begin(), gathers.end());
  ASSERT_GE(gathers.size(), 8u);
  for (size_t i = 1; i < gathers.size(); ++i)
    EXPECT_GE(gathers[i].first, gathers[i - 1].second) << i;
}

// Start of the first backward op and end of the last backward or weight-gradient op of
// device 0.
std::pair<Time, Time> backward_span(const test::SimRun& r) {
  Time first = Time::max(), last;
  for (OpId id : r.graph.stream(0)) {
    const OpKind k = r.graph.op(id).kind;
    if (k == OpKind::kBackward) first = std::min(first, r.timeline.start[id]);
    if (k == OpKind::kBackward || k == OpKind::kWeightGrad) last = max(last, r.timeline.end[id]);
  }
  return {first, last};
}

TEST(Tensor, BackwardAllReducesRunBesideTheWeightGradientsByHand) {
  // One layer, t = 2, GPipe, one micro-batch. With `tensor_overlap: backward` B and W are
  // one pass, head, layer, embedding, cut where an input gradient is all-reduced; each
  // all-reduce runs beside the weight gradient of the column-parallel GEMM it follows
  // (the head's logits; the layer's first MLP GEMM, then QKV) and what comes after that
  // weight gradient waits for it:
  //   head  (B + W) - dW(logits) | all-reduce || dW(logits) |
  //   layer (B + W) / 2 - dW(fc1) | all-reduce || dW(fc1) |
  //         the rest - dW(qkv)    | all-reduce || dW(qkv) |
  //   embedding B + W.
  // Each segment runs at half its whole-layer time on each rank (with the ops outside the
  // tensor-parallel region counted t = 2 times, as in the forward); an all-reduce is 2 steps
  // of (latency + sbh / bandwidth) on idle links.
  auto half = [](Time t) { return Time::ps(t.ps_count() / 2 + t.ps_count() % 2); };
  const test::SimRun r = test::run_yaml(gpt(2, 1, "  tensor_overlap: backward\n"));
  const auto L = at_degree(r.scenario.model.layers, 2);
  const Time ar = Cluster::transfer_time(r.scenario.cluster.route(0, 1), kSbh) * 2;
  ASSERT_EQ(L[2].tp_backward_beside.size(), 1u);
  ASSERT_EQ(L[1].tp_backward_beside.size(), 2u);
  const auto whole_b = [&](size_t i) {
    return L[i].tp_whole_backward_input + L[i].tp_whole_backward_weight;
  };
  const Time head = L[2].backward() + whole_b(2), layer = L[1].backward() + whole_b(1);
  const Time b_h = std::min(L[2].tp_backward_beside[0], head);
  const Time b_f = std::min(L[1].tp_backward_beside[0], layer / 2);
  const Time b_q = std::min(L[1].tp_backward_beside[1], layer - layer / 2);
  EXPECT_GT(b_f, Time::zero());
  const auto [start, end] = backward_span(r);
  Time at = start;
  for (const auto& [before, beside] : std::vector<std::pair<Time, Time>>{
           {head - b_h, b_h}, {layer / 2 - b_f, b_f}, {layer - layer / 2 - b_q, b_q}}) {
    const Time launched = at + half(before);  // the all-reduce starts here
    at = max(launched + half(beside), launched + ar);
  }
  EXPECT_EQ(end, at + half(L[0].backward()));

  // Without the overlap (the default, `none`): B holds the input gradients, every
  // all-reduce in line, and W follows with the weight gradients of all three layers.
  const test::SimRun n = test::run_yaml(gpt(2, 1));
  const auto [n_start, n_end] = backward_span(n);
  const Time bi = L[1].backward_input + L[1].tp_whole_backward_input;
  EXPECT_EQ(n_end,
            n_start + half(L[2].backward_input + L[2].tp_whole_backward_input) + ar + half(bi / 2) +
                ar + half(bi - bi / 2) + ar + half(L[0].backward_input) +
                half(L[0].backward_weight + L[1].backward_weight + L[1].tp_whole_backward_weight +
                     L[2].backward_weight + L[2].tp_whole_backward_weight));
  EXPECT_LT(end - start, n_end - n_start);
}

TEST(Tensor, SequenceParallelOverlapsOnlyTheReduceScatter) {
  // With sequence parallelism each all-reduce above is a reduce-scatter then an all-gather,
  // each one step of (latency + sbh / bandwidth) for t = 2. Only the reduce-scatter of the
  // input gradient runs beside the weight gradient: the all-gather (of the next sublayer's
  // output gradient) waits for it and for that weight gradient, what follows for the
  // all-gather. The segments are those of the test above.
  auto half = [](Time t) { return Time::ps(t.ps_count() / 2 + t.ps_count() % 2); };
  const test::SimRun r =
      test::run_yaml(gpt(2, 1, "  sequence_parallel: true\n  tensor_overlap: backward\n"));
  const auto L = at_degree(r.scenario.model.layers, 2);
  const Time step = Cluster::transfer_time(r.scenario.cluster.route(0, 1), kSbh);
  const Time head = L[2].backward(), layer = L[1].backward();
  const Time b_h = std::min(L[2].tp_backward_beside[0], head);
  const Time b_f = std::min(L[1].tp_backward_beside[0], layer / 2);
  const Time b_q = std::min(L[1].tp_backward_beside[1], layer - layer / 2);
  const auto [start, end] = backward_span(r);
  Time at = start;
  for (const auto& [before, beside] : std::vector<std::pair<Time, Time>>{
           {head - b_h, b_h}, {layer / 2 - b_f, b_f}, {layer - layer / 2 - b_q, b_q}}) {
    const Time launched = at + half(before);
    at = max(launched + half(beside), launched + step) + step;
  }
  EXPECT_EQ(end, at + half(L[0].backward()));
}

}  // namespace
}  // namespace pipesim
