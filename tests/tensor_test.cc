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
#include "tests/tensor_scenario.h"

namespace pipesim {
namespace {

using test::at_degree;
using test::gpt;
using test::kAs2b;
using test::kSbh;

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
