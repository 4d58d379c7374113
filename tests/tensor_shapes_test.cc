// Tensor parallelism of shape-described layers (SPEC section 3.1; docs/parallelism.md,
// "Shape-described layers"): Megatron-LM's column- and row-parallel linears, convolutions
// split by output channels, additive attention split by its width, LSTMs split by hidden
// units; one rank's times from the rooflines of the sharded shapes, the collectives as
// transfers on the tensor group's links.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "scenario/work_estimate.h"
#include "tests/support.h"

namespace pipesim {
namespace {

// One node of `gpus` A100s on NVSwitch, one micro-batch of one sample in mixed precision
// (2-byte elements), GPipe on one stage of tensor t unless `strategy` says otherwise.
std::string shaped(const std::string& input, const std::string& layers, int t,
                   const std::string& strategy = "", int gpus = 0) {
  return fmt::format(R"(cluster:
  gpu: a100-80gb
  nodes: 1
  gpus_per_node: {}
  intra_node: nvswitch2
model:
  input: {}
  layers:
{}
training: {{global_batch: 1, micro_batch: 1, precision: mixed, optimizer: adam}}
strategy:
  schedule: gpipe
{})",
                     gpus > 0 ? gpus : t, input, layers,
                     strategy.empty() ? fmt::format("  pipeline: 1\n  tensor: {}\n", t) : strategy);
}

// Transfers of each collective kind, and their bytes (each must be `each[kind]`).
std::map<CommKind, int> count(const test::SimRun& r, std::map<CommKind, int64_t> each) {
  std::map<CommKind, int> n;
  for (const Op& op : r.graph.ops()) {
    if (op.kind != OpKind::kTransfer || op.comm == CommKind::kActivation ||
        op.comm == CommKind::kGradient)
      continue;
    ++n[op.comm];
    EXPECT_EQ(op.bytes, each[op.comm]) << static_cast<int>(op.comm);
  }
  return n;
}

Time forward_end(const test::SimRun& r, int device) {
  Time end;
  for (OpId id : r.graph.stream(device)) {
    if (r.graph.op(id).kind == OpKind::kForward) end = max(end, r.timeline.end[id]);
  }
  return end;
}

TEST(TensorShapes, LinearPairIsColumnThenRowWithOneAllReduceEachWay) {
  // fc1 1024 -> 4096 column-parallel, fc2 4096 -> 1024 row-parallel on t = 2, 128 tokens:
  // forward one all-reduce of fc2's output (128 x 1024 x 2 bytes), backward one of fc1's
  // input gradient (as many). A ring of 2 is 2(t - 1) = 2 steps per member of bytes / 2:
  // 4 transfers of 128 x 1024 bytes each, 8 in all, and no all-gather.
  const std::string layers = "    - {linear: {out: 4096}}\n    - {linear: {out: 1024}}";
  const test::SimRun r = test::run_yaml(shaped("{sequence: [128, 1024]}", layers, 2));
  const int64_t half = 128 * 1024;
  const auto n = count(r, {{CommKind::kAllReduce, half}});
  EXPECT_EQ(n.at(CommKind::kAllReduce), 8);
  EXPECT_EQ(n.count(CommKind::kAllGather), 0u);
  // One rank runs fc1 with 4096 / 2 outputs and fc2 with 4096 / 2 inputs: the layers of a
  // single-GPU model 1024 -> 2048 -> 1024, then the all-reduce (2 steps of latency +
  // (bytes / 2) / bandwidth on the idle NVSwitch, the two ranks sending at once).
  const test::SimRun rank = test::run_yaml(shaped(
      "{sequence: [128, 1024]}", "    - {linear: {out: 2048}}\n    - {linear: {out: 1024}}", 1));
  const auto& ml = rank.scenario.model.layers;
  const Time ar = Cluster::transfer_time(r.scenario.cluster.route(0, 1), half) * 2;
  for (int d : {0, 1}) EXPECT_EQ(forward_end(r, d), ml[0].forward + ml[1].forward + ar) << d;
}

TEST(TensorShapes, LoneLinearAndConvGatherTheirOutput) {
  // A conv of 64 3x3 filters with batch norm on a [16, 32, 32] image, t = 2: each rank
  // computes 32 channels (and their batch norm), all-gathers the [64, 32, 32] output
  // (a ring of 2: one step, each rank sending its half, 64 x 32 x 32 bytes), and
  // all-reduces the input gradient in the backward (4 transfers of 16 x 32 x 32 bytes).
  const std::string conv = "    - {conv: {out: 64, batch_norm: true}}";
  const test::SimRun r = test::run_yaml(shaped("{image: [16, 32, 32]}", conv, 2), true);
  const auto n =
      count(r, {{CommKind::kAllGather, 64 * 32 * 32}, {CommKind::kAllReduce, 16 * 32 * 32}});
  EXPECT_EQ(n.at(CommKind::kAllGather), 2);
  EXPECT_EQ(n.at(CommKind::kAllReduce), 4);
  // Its forward on a rank is a 32-filter conv's, then the all-gather's one step.
  const test::SimRun rank = test::run_yaml(
      shaped("{image: [16, 32, 32]}", "    - {conv: {out: 32, batch_norm: true}}", 1));
  const Time ag = Cluster::transfer_time(r.scenario.cluster.route(0, 1), 64 * 32 * 32);
  EXPECT_EQ(forward_end(r, 0), rank.scenario.model.layers[0].forward + ag);
  // Activations per rank: the input whole (16 x 32 x 32 x 2 bytes), batch norm's input
  // split (32 x 32 x 32 x 2). Weights: 2 bytes per parameter, half of them each.
  EXPECT_EQ(test::peak_activation_bytes(r, 0), 16 * 32 * 32 * 2 + 32 * 32 * 32 * 2);
  const int64_t params = r.scenario.model.layers[0].params;  // 9 x 16 x 64 + 64 + 2 x 64
  ASSERT_EQ(params, 9 * 16 * 64 + 64 + 128);
  EXPECT_EQ(r.graph.static_memory(0)[static_cast<size_t>(MemCategory::kWeights)], params / 2 * 2);
  // A linear on its own is column-parallel and gathers its output too.
  const test::SimRun lin =
      test::run_yaml(shaped("{sequence: [8, 64]}", "    - {linear: {out: 32}}", 2));
  const auto m = count(lin, {{CommKind::kAllGather, 8 * 32}, {CommKind::kAllReduce, 8 * 64}});
  EXPECT_EQ(m.at(CommKind::kAllGather), 2);
  EXPECT_EQ(m.at(CommKind::kAllReduce), 4);
}

TEST(TensorShapes, LstmGathersTheHiddenStateEveryStep) {
  // An LSTM of 128 hidden units over 4 steps of 64 features, t = 2: each step all-gathers
  // the new hidden state (128 x 2 bytes; one ring step, each rank sending 128 bytes): 4 x 2
  // transfers. The backward all-reduces the hidden state's gradient every step (4 x 4
  // transfers of 128 bytes) and then the input gradient (4 x 64 x 2 bytes: 4 transfers of
  // 256 bytes).
  const test::SimRun r =
      test::run_yaml(shaped("{sequence: [4, 64]}", "    - {lstm: {hidden: 128}}", 2));
  int gathers = 0, small = 0, large = 0;
  for (const Op& op : r.graph.ops()) {
    if (op.comm == CommKind::kAllGather) {
      ++gathers;
      EXPECT_EQ(op.bytes, 128);
    } else if (op.comm == CommKind::kAllReduce) {
      ++(op.bytes == 128 ? small : large);
      if (op.bytes != 128) {
        EXPECT_EQ(op.bytes, 256);
      }
    }
  }
  EXPECT_EQ(gathers, 8);
  EXPECT_EQ(small, 16);
  EXPECT_EQ(large, 4);
  // The scenario's work estimate (its size guard) counts these 28 transfers, and one more
  // compute part per collective on each rank: 2 ranks x (F, B, W, optimizer + 9 parts).
  const WorkEstimate w = estimate_work(r.scenario);
  EXPECT_EQ(w.transfers, 28);
  EXPECT_EQ(w.compute_ops, 2 * (3 + 1 + 9));
}

TEST(TensorShapes, AttentionAllReducesItsScores) {
  // Additive attention of 6 tokens of 32 features over 8 carried tokens of 64 (the
  // embedding on its own stage, tensor 1), width 16 split over t = 2: an all-reduce of the
  // partial scores (6 x 8 x 2 bytes: 4 transfers of 48 bytes) before the softmax, and of
  // the query's and keys' input gradients in the backward ((6 x 32 + 8 x 64) x 2 bytes:
  // 4 transfers of 704 bytes).
  const std::string layers =
      "    - {embedding: {vocab: 100, dim: 32, tokens: 6}}\n    - {attention: {hidden: 16}}";
  const std::string strategy =
      "  stages:\n    - {layers: 0, replicas: 1}\n    - {layers: 1, replicas: 1, tensor: 2}\n";
  const test::SimRun r = test::run_yaml(shaped("{sequence: [8, 64]}", layers, 2, strategy, 3));
  int scores = 0, grads = 0;
  for (const Op& op : r.graph.ops()) {
    if (op.comm != CommKind::kAllReduce) continue;
    ++(op.bytes == 48 ? scores : grads);
    if (op.bytes != 48) {
      EXPECT_EQ(op.bytes, 704);
    }
  }
  EXPECT_EQ(scores, 4);
  EXPECT_EQ(grads, 4);
}

TEST(TensorShapes, OneRankAtDegreeOneIsTheWholeLayer) {
  // The split at t = 1 reproduces each layer's own costs: same ops, same rooflines.
  const test::SimRun r =
      test::run_yaml(shaped("{image: [3, 16, 16]}",
                            "    - {conv: {out: 8, batch_norm: true}}\n    - {pool: {kernel: 2}}\n"
                            "    - {linear: {out: 40}}\n    - {linear: {out: 10}}",
                            1));
  for (const Layer& l : r.scenario.model.layers) {
    ASSERT_TRUE(l.tensor_split) << l.name;
    const TensorShard s = (*l.tensor_split)(1, 1);
    EXPECT_EQ(s.forward, l.forward) << l.name;
    EXPECT_EQ(s.backward_input, l.backward_input) << l.name;
    EXPECT_EQ(s.backward_weight, l.backward_weight) << l.name;
    EXPECT_EQ(s.split_activation + s.replicated_activation, l.activation_bytes) << l.name;
  }
  const test::SimRun lstm = test::run_yaml(
      shaped("{sequence: [5, 16]}", "    - {lstm: {hidden: 24, bidirectional: true}}", 1));
  const Layer& l = lstm.scenario.model.layers[0];
  const TensorShard s = (*l.tensor_split)(1, 1);
  EXPECT_EQ(s.forward, l.forward);
  EXPECT_EQ(s.backward_input, l.backward_input);
  EXPECT_EQ(s.split_activation + s.replicated_activation, l.activation_bytes);
}

TEST(TensorShapes, UnsplittableLayersAndSequenceParallelAreInputErrors) {
  const auto err = [](const std::string& yaml) {
    const std::string path = test::write_temp("tp.yaml", yaml);
    return test::cli({"run", path});
  };
  const test::CliResult e =
      err(shaped("{image: [16, 8, 8]}", "    - {bottleneck: {mid: 4, out: 16}}", 2));
  EXPECT_EQ(e.code, 2);
  EXPECT_NE(e.err.find("has no operator layout to split 2 ways"), std::string::npos) << e.err;
  const test::CliResult sp = err(shaped("{sequence: [8, 64]}", "    - {linear: {out: 32}}", 2,
                                        "  pipeline: 1\n  tensor: 2\n  sequence_parallel: true\n"));
  EXPECT_EQ(sp.code, 2);
  EXPECT_NE(sp.err.find("strategy.sequence_parallel"), std::string::npos) << sp.err;
}

}  // namespace
}  // namespace pipesim
