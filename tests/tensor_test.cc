// Tensor and sequence parallelism (SPEC section 3.1): Megatron-LM's layout of a transformer
// layer, its all-reduces as transfers on the tensor group's links, Korthikanti et al.'s
// activation memory (arXiv 2205.05198, Table 2) and weights divided by t.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "scenario/setup.h"
#include "schedules/lower.h"
#include "tests/support.h"

namespace pipesim {
namespace {

// One node of `t` A100s on NVSwitch; a generated transformer of `layers` layers (h = 256,
// a = 4, s = 128, b = 1, mixed precision): embedding, the layers, the output head.
std::string gpt(int t, int layers, const std::string& extra = "", int gpus = 0) {
  return fmt::format(R"(cluster:
  gpu: a100-80gb
  nodes: 1
  gpus_per_node: {}
  intra_node: nvswitch2
model: {{generator: transformer, layers: {}, hidden: 256, heads: 4, sequence: 128, vocab: 1024}}
training: {{global_batch: 1, micro_batch: 1, precision: mixed, optimizer: adam}}
strategy:
  schedule: gpipe
  pipeline: 1
  tensor: {}
{})",
                     gpus > 0 ? gpus : t, layers, t, extra);
}

constexpr int64_t kSbh = 128 * 256;  // s x b x h
constexpr int64_t kAs2b = 4 * 128 * 128;

TEST(Tensor, AllReducesPerLayerAndTheirBytes) {
  // Forward: the embedding's all-reduce, then 2 per layer; backward: the head's input
  // gradient, then 2 per layer: 2 + 4 L collectives of sbh x 2 bytes. A ring of t = 2 is
  // 2(t - 1) steps of bytes / t per member: 4 transfers of sbh bytes each.
  for (int L : {1, 3}) {
    const test::SimRun r = test::run_yaml(gpt(2, L));
    int64_t transfers = 0, bytes = 0;
    for (const Op& op : r.graph.ops()) {
      if (op.comm != CommKind::kAllReduce) continue;
      ++transfers;
      bytes += op.bytes;
      EXPECT_EQ(op.bytes, kSbh);
    }
    EXPECT_EQ(transfers, (2 + 4 * L) * 4) << L;
    EXPECT_EQ(bytes, (2 + 4 * L) * 4 * kSbh);  // each all-reduce moves 2(t - 1) x 2sbh
  }
}

TEST(Tensor, ContextRanksReduceTheirOwnTokens) {
  // Tensor and context parallelism, 2 x 2 (s = 4096, h = 1024, bf16, sequence parallelism):
  // a context rank holds s / 2 tokens, so each of its tensor reduce-scatters moves one ring
  // step of (s / 2) x h x 2 bytes / t = 2 MiB per member, half of what the same layer moves
  // without context parallelism (and every transfer of one is as big).
  const auto bytes = [](int cp) {
    const test::SimRun r = test::run_yaml(fmt::format(
        R"(cluster: {{gpu: h100-80gb, nodes: 1, gpus_per_node: {}, intra_node: nvswitch}}
model: {{generator: transformer, layers: 1, hidden: 1024, heads: 8, ffn: 4096, vocab: 32000, sequence: 4096, flash_attention: true}}
training: {{global_batch: 1, micro_batch: 1, precision: bf16, optimizer: adam}}
strategy: {{schedule: gpipe, pipeline: 1, tensor: 2, context: {}, sequence_parallel: true}}
)",
        2 * cp, cp));
    std::set<int64_t> seen;
    for (const Op& op : r.graph.ops())
      if (op.comm == CommKind::kReduceScatter) seen.insert(op.bytes);
    return seen;
  };
  EXPECT_EQ(bytes(1), std::set<int64_t>{int64_t{4096} * 1024 * 2 / 2});
  EXPECT_EQ(bytes(2), std::set<int64_t>{int64_t{2048} * 1024 * 2 / 2});
}

// The layers as the ranks of a tensor group of degree t cost them (each split GEMM at
// the efficiency of one rank's share).
std::vector<Layer> at_degree(const std::vector<Layer>& layers, int t) {
  std::vector<Layer> out;
  for (const Layer& l : layers) out.push_back(l.at_tensor_degree(t));
  return out;
}

TEST(Tensor, ForwardTimeOnAnIdleNvSwitchByHand) {
  // F on each rank, one layer, t = 2: the embedding's half, its all-reduce, the layer's
  // first half / 2, an all-reduce, its second half / 2, an all-reduce, the head / 2. Each
  // all-reduce of 2sbh bytes on 2 GPUs is 2 steps of (latency + sbh / bandwidth) on the
  // route between them, the two ranks sending in opposite directions at once. The layer
  // norms and dropout-residual adds (the final layer norm in the head) run whole on each
  // rank: the layer's time is F + (t - 1) x theirs before the division by t.
  const test::SimRun r = test::run_yaml(gpt(2, 1));
  const auto layers = at_degree(r.scenario.model.layers, 2);
  auto half = [](Time t) { return Time::ps(t.ps_count() / 2 + t.ps_count() % 2); };
  EXPECT_GT(layers[1].tp_whole_forward, Time::zero());
  EXPECT_EQ(layers[0].tp_whole_forward, Time::zero());
  const Time layer = layers[1].forward + layers[1].tp_whole_forward;
  const Time first = layer / 2, second = layer - layer / 2;
  const Time ar = Cluster::transfer_time(r.scenario.cluster.route(0, 1), kSbh) * 2;
  const Time expect = half(layers[0].forward) + ar + half(first) + ar + half(second) + ar +
                      half(layers[2].forward + layers[2].tp_whole_forward);
  Time f_end;
  for (OpId id : r.graph.stream(0)) {
    const Op& op = r.graph.op(id);
    if (op.kind == OpKind::kForward) f_end = max(f_end, r.timeline.end[id]);
  }
  EXPECT_EQ(f_end, expect);
}

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

TEST(Tensor, KorthikantiActivationsAndWeightsPerGpu) {
  // GPipe, one micro-batch, one stage: the peak holds every layer's activations once.
  // Per transformer layer (16-bit): t = 1: sbh(34 + 5as/h); tensor t without sequence
  // parallelism: sbh(10 + 24/t + 5as/(ht)); with it: sbh(34/t + 5as/(ht)). The embedding
  // keeps its dropout mask (sbh bytes); the head its layer norm's input and output (2 x 2sbh)
  // and the logits (2 bytes) with their fp32 softmax: s b V x 6. Without sequence
  // parallelism the mask and the layer norm's tensors stay whole, the logits divide by t.
  const test::SimRun one = test::run_yaml(gpt(1, 1), true);
  const auto& layers = one.scenario.model.layers;
  const int64_t layer = 34 * kSbh + 5 * kAs2b;
  const int64_t logits = 128 * 1024 * 6, ends_whole = kSbh + 4 * kSbh;
  ASSERT_EQ(layers[1].activation_bytes, layer);
  ASSERT_EQ(layers[0].activation_bytes, kSbh);
  ASSERT_EQ(layers[2].activation_bytes, logits + 4 * kSbh);
  EXPECT_EQ(test::peak_activation_bytes(one, 0), ends_whole + logits + layer);
  for (int t : {2, 4}) {
    const test::SimRun tp = test::run_yaml(gpt(t, 1), true);
    EXPECT_EQ(test::peak_activation_bytes(tp, 0),
              ends_whole + logits / t + 10 * kSbh + (24 * kSbh + 5 * kAs2b) / t)
        << t;
    const test::SimRun sp = test::run_yaml(gpt(t, 1, "  sequence_parallel: true\n"), true);
    EXPECT_EQ(test::peak_activation_bytes(sp, 0), (ends_whole + logits + layer) / t) << t;
    // Weights: 2 bytes per parameter, 1/t of them but for those every rank holds whole:
    // the 128 x 256 learned positions, each layer's two norms and two output biases (6h)
    // and the final norm (2h).
    int64_t params = 0;
    for (const Layer& l : one.scenario.model.layers) params += l.params;
    const int64_t whole = 128 * 256 + 6 * 256 + 2 * 256;
    EXPECT_EQ(tp.report.devices[0].at_peak[static_cast<size_t>(MemCategory::kWeights)],
              ((params - whole + t - 1) / t + whole) * 2);
  }
}

TEST(Tensor, SequenceParallelReduceScatterThenAllGather) {
  // With sequence parallelism each of the 2 + 4 L all-reduces is a ring reduce-scatter
  // ((t - 1) steps of 2sbh / t per member) then a ring all-gather (as many): for t = 2,
  // 2 transfers of sbh bytes each, and no all-reduce left. On idle links the pair takes
  // what the all-reduce took (2 steps of latency + sbh / bandwidth), so the forward ends
  // earlier than without sequence parallelism by what the layer norms and dropout-residual
  // adds no longer run whole: half of theirs on each of the 2 ranks (to a picosecond per
  // segment of rounding).
  const int L = 2;
  const test::SimRun sp = test::run_yaml(gpt(2, L, "  sequence_parallel: true\n"));
  std::map<CommKind, int64_t> transfers;
  for (const Op& op : sp.graph.ops()) {
    if (op.kind != OpKind::kTransfer) continue;
    ++transfers[op.comm];
    EXPECT_EQ(op.bytes, kSbh);
  }
  EXPECT_EQ(transfers[CommKind::kAllReduce], 0);
  EXPECT_EQ(transfers[CommKind::kReduceScatter], (2 + 4 * L) * 2);
  EXPECT_EQ(transfers[CommKind::kAllGather], (2 + 4 * L) * 2);
  // Each all-gather waits for its reduce-scatter: with t = 2 both rings have one step, so
  // every all-gather transfer depends on a reduce-scatter transfer directly.
  for (OpId id = 0; id < sp.graph.size(); ++id) {
    if (sp.graph.op(id).comm != CommKind::kAllGather) continue;
    int after_reduce_scatter = 0;
    for (OpId d : sp.graph.deps(id)) {
      after_reduce_scatter += sp.graph.op(d).comm == CommKind::kReduceScatter;
    }
    EXPECT_GE(after_reduce_scatter, 1) << id;
  }
  const test::SimRun tp = test::run_yaml(gpt(2, L));
  auto forward_end = [](const test::SimRun& r) {
    Time end;
    for (OpId id : r.graph.stream(0)) {
      if (r.graph.op(id).kind == OpKind::kForward) end = max(end, r.timeline.end[id]);
    }
    return end;
  };
  const auto& layers = tp.scenario.model.layers;
  const Time saved = (layers[1].tp_whole_forward * L + layers.back().tp_whole_forward) / 2;
  EXPECT_NEAR(static_cast<double>((forward_end(tp) - forward_end(sp)).ps_count()),
              static_cast<double>(saved.ps_count()), 2.0 * (2 * L + 2));
}

TEST(Tensor, KorthikantiTableTwoWithRecompute) {
  // Activations kept per transformer layer from F to B (Korthikanti et al. 2022, Table 2),
  // 16-bit, b = 1: selective recompute keeps sbh(10 + 24/t) without and sbh 34/t with
  // sequence parallelism; full recompute keeps the layer's 2sbh input, whole on every
  // rank without sequence parallelism and split t ways with it (the input of a layer
  // lives in the sequence-parallel region). What F keeps is its allocation at start plus
  // its release at end; one layer's share is the difference between 2 layers and 1.
  auto kept = [](int t, int layers, const std::string& extra) {
    const test::SimRun r = test::run_yaml(gpt(t, layers, extra));
    for (OpId id : r.graph.stream(0)) {
      const Op& op = r.graph.op(id);
      if (op.kind == OpKind::kForward && op.part == 0) {
        int64_t net = op.mem_at_start;
        for (OpId p : r.graph.stream(0)) {
          const Op& q = r.graph.op(p);
          if (q.kind == OpKind::kForward) net += q.mem_at_end;
        }
        return net;
      }
    }
    return int64_t{-1};
  };
  for (int t : {2, 4}) {
    for (bool sp : {false, true}) {
      const std::string s = sp ? "  sequence_parallel: true\n" : "";
      const int64_t selective = sp ? 34 * kSbh / t : 10 * kSbh + 24 * kSbh / t;
      const int64_t full = sp ? 2 * kSbh / t : 2 * kSbh;
      for (const auto& [mode, want] :
           std::vector<std::pair<std::string, int64_t>>{{"selective", selective}, {"full", full}}) {
        const std::string extra = s + "  recompute: " + mode + "\n";
        EXPECT_EQ(kept(t, 2, extra) - kept(t, 1, extra), want) << t << sp << mode;
      }
    }
  }
}

TEST(Tensor, StaticMemoryDividesByT) {
  // Weights, gradients and optimizer state of mixed-precision Adam (2, 2 and 12 bytes per
  // parameter), each on 1/t of the split parameters (rounded up) plus those every rank
  // holds whole: positions 128 x 256, 6h per layer (norms, output biases), the final norm.
  int64_t params = 0;
  for (const Layer& l : test::run_yaml(gpt(1, 2)).scenario.model.layers) params += l.params;
  const int64_t whole = 128 * 256 + 2 * 6 * 256 + 2 * 256;
  for (int t : {1, 2, 4}) {
    const test::SimRun r = test::run_yaml(gpt(t, 2));
    const int64_t share = t == 1 ? params : (params - whole + t - 1) / t + whole;
    for (int d = 0; d < t; ++d) {
      const MemBreakdown& m = r.graph.static_memory(d);
      EXPECT_EQ(m[static_cast<size_t>(MemCategory::kWeights)], share * 2) << t;
      EXPECT_EQ(m[static_cast<size_t>(MemCategory::kGradients)], share * 2) << t;
      EXPECT_EQ(m[static_cast<size_t>(MemCategory::kOptimizer)], share * 12) << t;
    }
  }
}

TEST(Tensor, SummaryShowsTheLayout) {
  const test::SimRun r = test::run_yaml(gpt(2, 1, "  sequence_parallel: true\n"));
  EXPECT_EQ(r.report.info.layout, "TP 2 x PP 1 x DP 1");
  EXPECT_NE(
      summary_table(r.report).find("layout      TP 2 x PP 1 x DP 1 = 2 GPUs, sequence parallel"),
      std::string::npos)
      << summary_table(r.report);
}

TEST(Tensor, GroupsStayInsideANodeAndDataParallelGroupsPerRank) {
  // 2 nodes of 4: tensor 4 x data 2 puts each tensor group on one node; the gradient
  // all-reduces run between equal ranks of the two copies (4 groups of 2).
  std::string y = gpt(4, 2, "  data: 2\n", 4);
  y.replace(y.find("nodes: 1"), 8, "nodes: 2\n  inter_node: ib-hdr");
  y.replace(y.find("global_batch: 1,"), 16, "global_batch: 2,");
  y.replace(y.find("schedule: gpipe"), 15, "schedule: dapple");
  const test::SimRun r = test::run_yaml(y);
  for (const auto& copy : r.scenario.placement) {
    const auto& lanes = copy[0];
    for (int d : lanes)
      EXPECT_EQ(r.scenario.cluster.device(d).node, r.scenario.cluster.device(lanes[0]).node);
  }
  // Gradient transfers cross nodes only between equal ranks.
  for (const Op& op : r.graph.ops()) {
    if (op.comm != CommKind::kAllReduce) continue;
    const auto& a = r.scenario.cluster.device(op.device);
    const auto& b = r.scenario.cluster.device(op.peer);
    if (a.node != b.node) {
      EXPECT_EQ(op.device % 4, op.peer % 4);
    }
  }
}

// `pipesim model --ops` shows one rank's share of each op (Layer::rank_ops): summed over a
// stage's layers and ops, the shares are the time the lowering gives each rank, the stage
// profile's time over t (each share rounded up to the picosecond, so within one ps per op).
TEST(Tensor, RankOpsSumToWhatEachRankRuns) {
  for (const bool sp : {false, true}) {
    const Scenario sc =
        load_scenario_text(gpt(8, 2, sp ? "  sequence_parallel: true\n" : ""), "<test>");
    const std::vector<StageProfile> prof =
        stage_profiles(sc.model, sc.strategy.stages, recompute_modes(sc), stage_tensor_degrees(sc),
                       sc.strategy.sequence_parallel, group_degrees(sc));
    ASSERT_EQ(prof.size(), 1u);
    int64_t fwd = 0, bwd = 0, ops = 0;
    for (const Layer& l : sc.model.layers) {
      for (const OpCost& op : l.rank_ops(8, 1, 1, sp)) {
        fwd += op.forward.ps_count();
        bwd += (op.backward_input + op.backward_weight).ps_count();
        ++ops;
      }
    }
    const double per_rank_fwd = static_cast<double>(prof[0].forward.ps_count()) / 8;
    const double per_rank_bwd =
        static_cast<double>((prof[0].backward_input + prof[0].backward_weight).ps_count()) / 8;
    EXPECT_NEAR(static_cast<double>(fwd), per_rank_fwd, static_cast<double>(ops)) << sp;
    EXPECT_NEAR(static_cast<double>(bwd), per_rank_bwd, 2.0 * static_cast<double>(ops)) << sp;
    // A split GEMM is cheaper per rank than whole; a norm without sequence parallelism is not.
    const Layer& layer = sc.model.layers[1];
    const std::vector<OpCost> rank = layer.rank_ops(8, 1, 1, sp);
    for (size_t k = 0; k < rank.size(); ++k) {
      if (layer.ops[k].name == "fc1") {
        EXPECT_LT(rank[k].forward * 8, layer.ops[k].forward * 2);
      }
      if (layer.ops[k].name == "ln1" && !sp) {
        EXPECT_EQ(rank[k].forward, layer.ops[k].forward);
      }
    }
  }
}

TEST(Tensor, MeasuredLayersCannotBeSplit) {
  const auto r =
      test::cli({"run", test::write_temp("tensor-profile.yaml",
                                         R"(cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 2}
model:
  layers:
    - {name: l0, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, params: 1M}
training: {global_batch: 2, micro_batch: 1}
strategy: {schedule: dapple, pipeline: 1, tensor: 2}
)")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("strategy.tensor: layer 0 ('l0') has no operator layout to split 2 ways"),
            std::string::npos)
      << r.err;
  const auto sp = test::cli(
      {"run", test::write_temp("tensor-sp.yaml", gpt(1, 1, "  sequence_parallel: true\n"))});
  EXPECT_EQ(sp.code, 2);
  EXPECT_NE(sp.err.find("strategy.sequence_parallel"), std::string::npos) << sp.err;
}

// tensor_overlap with no tensor group says so (stderr and the report's warnings); with one,
// it does not.
TEST(Tensor, OverlapWithoutATensorGroupWarns) {
  const auto lone = test::cli(
      {"run", test::write_temp("overlap-t1.yaml", gpt(1, 1, "  tensor_overlap: full\n"))});
  EXPECT_EQ(lone.code, 0) << lone.err;
  EXPECT_NE(lone.err.find("warning: strategy.tensor_overlap: no effect"), std::string::npos)
      << lone.err;
  const auto two = test::cli(
      {"run", test::write_temp("overlap-t2.yaml", gpt(2, 1, "  tensor_overlap: full\n"))});
  EXPECT_EQ(two.code, 0) << two.err;
  EXPECT_EQ(two.err.find("tensor_overlap: no effect"), std::string::npos) << two.err;
}

TEST(Tensor, OverlapIsNoneBackwardOrFull) {
  const auto r = test::cli(
      {"run", test::write_temp("tensor-overlap.yaml", gpt(2, 1, "  tensor_overlap: forward\n"))});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("strategy.tensor_overlap"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("backward"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("full"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pipesim
