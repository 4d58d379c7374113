// Tensor and sequence parallelism (SPEC section 3.1): Megatron-LM's layout of a transformer
// layer, its all-reduces as transfers on the tensor group's links, Korthikanti et al.'s
// activation memory (arXiv 2205.05198, Table 2) and weights divided by t.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

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

TEST(Tensor, ForwardTimeOnAnIdleNvSwitchByHand) {
  // F on each rank, one layer, t = 2: the embedding's half, its all-reduce, the layer's
  // first half / 2, an all-reduce, its second half / 2, an all-reduce, the head / 2. Each
  // all-reduce of 2sbh bytes on 2 GPUs is 2 steps of (latency + sbh / bandwidth) on the
  // route between them, the two ranks sending in opposite directions at once.
  const test::SimRun r = test::run_yaml(gpt(2, 1));
  const auto& layers = r.scenario.model.layers;
  auto half = [](Time t) { return Time::ps(t.ps_count() / 2 + t.ps_count() % 2); };
  const Time layer = layers[1].forward;
  const Time first = layer / 2, second = layer - layer / 2;
  const Time ar = Cluster::transfer_time(r.scenario.cluster.route(0, 1), kSbh) * 2;
  const Time expect =
      half(layers[0].forward) + ar + half(first) + ar + half(second) + ar + half(layers[2].forward);
  Time f_end;
  for (OpId id : r.graph.stream(0)) {
    const Op& op = r.graph.op(id);
    if (op.kind == OpKind::kForward) f_end = max(f_end, r.timeline.end[id]);
  }
  EXPECT_EQ(f_end, expect);
}

TEST(Tensor, KorthikantiActivationsAndWeightsPerGpu) {
  // GPipe, one micro-batch, one stage: the peak holds every layer's activations once.
  // Per transformer layer (16-bit): t = 1: sbh(34 + 5as/h); tensor t without sequence
  // parallelism: sbh(10 + 24/t + 5as/(ht)); with it: sbh(34/t + 5as/(ht)). The embedding
  // and head activations and every weight divide by t.
  const test::SimRun one = test::run_yaml(gpt(1, 1), true);
  const auto& layers = one.scenario.model.layers;
  const int64_t layer = 34 * kSbh + 5 * kAs2b;
  ASSERT_EQ(layers[1].activation_bytes, layer);
  const int64_t ends = layers[0].activation_bytes + layers[2].activation_bytes;
  EXPECT_EQ(test::peak_activation_bytes(one, 0), ends + layer);
  for (int t : {2, 4}) {
    const test::SimRun tp = test::run_yaml(gpt(t, 1), true);
    EXPECT_EQ(test::peak_activation_bytes(tp, 0),
              ends / t + 10 * kSbh + (24 * kSbh + 5 * kAs2b) / t)
        << t;
    const test::SimRun sp = test::run_yaml(gpt(t, 1, "  sequence_parallel: true\n"), true);
    EXPECT_EQ(test::peak_activation_bytes(sp, 0), (ends + layer) / t) << t;
    // Weights: 2 bytes per parameter, 1/t of them.
    int64_t params = 0;
    for (const Layer& l : one.scenario.model.layers) params += l.params;
    EXPECT_EQ(tp.report.devices[0].at_peak[static_cast<size_t>(MemCategory::kWeights)],
              (params + t - 1) / t * 2);
  }
}

TEST(Tensor, SequenceParallelReduceScatterThenAllGather) {
  // With sequence parallelism each of the 2 + 4 L all-reduces is a ring reduce-scatter
  // ((t - 1) steps of 2sbh / t per member) then a ring all-gather (as many): for t = 2,
  // 2 transfers of sbh bytes each, and no all-reduce left. On idle links the pair takes
  // what the all-reduce took (2 steps of latency + sbh / bandwidth), so the forward ends
  // when it did without sequence parallelism.
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
  EXPECT_EQ(forward_end(sp), forward_end(tp));
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
  // parameter), each on 1/t of the parameters (rounded up).
  int64_t params = 0;
  for (const Layer& l : test::run_yaml(gpt(1, 2)).scenario.model.layers) params += l.params;
  for (int t : {1, 2, 4}) {
    const test::SimRun r = test::run_yaml(gpt(t, 2));
    const int64_t share = (params + t - 1) / t;
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

}  // namespace
}  // namespace pipesim
