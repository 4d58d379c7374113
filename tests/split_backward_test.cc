// A split backward's memory (SPEC section 3): B frees everything W does not read, W frees
// the rest; the zero-bubble schedules plan with the same numbers the tracker counts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "costs/models.h"
#include "schedules/lower.h"
#include "tests/support.h"

namespace pipesim {
namespace {

const GpuSpec& a100() {
  return *find_gpu_preset("a100-80gb");
}

TEST(SplitBackward, TransformerLayerKeepsWhatItsWeightGradientsRead) {
  // Zero Bubble's accounting (Qi et al. 2024, Table 1): a 16-bit GPT layer's F allocates
  // 34h + 5as bytes per token; its W reads each GEMM's input and output gradient: QKV h + 3h,
  // the projection h + h, the MLP's h + 4h and 4h + h elements, 16h elements = 32h bytes.
  // s = 1024, b = 2, h = 1024, a = 16: sbh = 2097152.
  TransformerShape t{2, 1024, 16, 4096, 1024, 32000, false, true};
  Training training;
  training.micro_batch = 2;
  training.precision = Precision::kMixed;
  const Model m = transformer_model(t, training, a100());
  const int64_t sbh = 1024LL * 2 * 1024;
  const Layer& layer = m.layers[1];
  EXPECT_EQ(layer.activation_bytes, sbh * (34 + 5 * 16 * 1024 / 1024));
  ASSERT_TRUE(layer.weight_activation.has_value());
  EXPECT_EQ(*layer.weight_activation, 32 * sbh);
  // Tensor parallelism leaves QKV's and the MLP's inputs whole on every rank: 2 x 2sbh.
  EXPECT_EQ(layer.tp_replicated_weight_activation, 4 * sbh);
  // The embedding's W scatters the output gradient into the table: it keeps at most what
  // its forward allocated (the dropout mask).
  EXPECT_EQ(m.layers.front().weight_kept(), m.layers.front().activation_bytes);
}

// The lowering's memory deltas of one B and W on a 1-GPU stage of one generated layer.
TEST(SplitBackward, BFreesAllButWhatWReads) {
  const std::string yaml = R"(
cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 2, intra_node: nvswitch2}
model: {generator: transformer, layers: 2, hidden: 1024, heads: 16, sequence: 1024, vocab: 32000}
training: {global_batch: 8, micro_batch: 2, precision: mixed, optimizer: adam}
strategy: {schedule: zb-h1, stages: [{layers: 0-1}, {layers: 2-3}]}
)";
  const test::SimRun r = test::run_yaml(yaml);
  const std::vector<StageProfile> prof =
      stage_profiles(r.scenario.model, r.scenario.strategy.stages);
  // Stage 0 holds the embedding (its 1-byte mask, kept until W) and one layer.
  const int64_t sbh = 1024LL * 2 * 1024;
  const int64_t act = sbh + sbh * (34 + 80), weight = sbh + 32 * sbh;
  EXPECT_EQ(prof[0].activation_bytes, act);
  EXPECT_EQ(prof[0].weight_activation_bytes, weight);
  int checked = 0;
  for (const Op& op : r.graph.ops()) {
    if (op.device != 0 || op.micro_batch != 0) continue;
    if (op.kind == OpKind::kForward) {
      EXPECT_EQ(op.mem_at_start, act);
    }
    if (op.kind == OpKind::kBackward) {
      EXPECT_EQ(op.mem_at_end, weight - act);
    }
    if (op.kind == OpKind::kWeightGrad) {
      EXPECT_EQ(op.mem_at_end, -weight);
    }
    checked += op.kind == OpKind::kBackward || op.kind == OpKind::kWeightGrad;
  }
  EXPECT_EQ(checked, 2);
}

// zb-2p plans its order under 2p M_B per stage with the tracker's numbers (gpu_activation),
// so the simulated activations never pass that limit; before, the tracker kept every
// micro-batch whole until W while the builder assumed half was freed at B, and the last
// stages held up to m micro-batches.
TEST(SplitBackward, ZeroBubbleLimitsHoldInTheSimulation) {
  for (const char* schedule : {"zb-1p", "zb-2p"}) {
    for (const int tensor : {1, 2}) {
      const std::string yaml = fmt::format(R"(
cluster: {{gpu: a100-80gb, nodes: 1, gpus_per_node: 8, intra_node: nvswitch2}}
model: {{generator: transformer, layers: 6, hidden: 1024, heads: 16, sequence: 1024, vocab: 32000}}
training: {{global_batch: 48, micro_batch: 2, precision: mixed, optimizer: adam}}
strategy:
  schedule: {}
  tensor: {}
  stages: [{{layers: 0-1}}, {{layers: 2-3}}, {{layers: 4-5}}, {{layers: 6-7}}]
)",
                                           schedule, tensor);
      const test::SimRun r = test::run_yaml(yaml, true);
      const std::vector<StageProfile> prof =
          stage_profiles(r.scenario.model, r.scenario.strategy.stages,
                         std::vector<Recompute>(4, Recompute::kNone), std::vector<int>(4, tensor));
      const int S = 4, factor = std::string(schedule) == "zb-2p" ? 2 : 1;
      for (int g = 0; g < S; ++g) {
        const GpuActivation a =
            gpu_activation(prof[static_cast<size_t>(g)], 1, tensor, false, false);
        EXPECT_GT(a.weight, 0);
        EXPECT_LT(a.weight, a.held);
        for (int k = 0; k < tensor; ++k) {
          const int device =
              r.scenario.placement[0][static_cast<size_t>(g)][static_cast<size_t>(k)];
          EXPECT_LE(test::peak_activation_bytes(r, device), int64_t{factor} * S * a.held)
              << schedule << " tensor " << tensor << " stage " << g;
        }
      }
    }
  }
}

TEST(SplitBackward, ProfileLayersGiveWeightActivation) {
  // Two profile layers of 8 MiB, W keeping 2 MiB of the first and all of the second.
  const std::string yaml = R"(
cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 1}
model:
  layers:
    - {name: a, forward: 1 ms, backward_input: 1 ms, backward_weight: 1 ms, activation: 8 MiB, weight_activation: 2 MiB}
    - {name: b, forward: 1 ms, backward_input: 1 ms, backward_weight: 1 ms, activation: 8 MiB}
training: {global_batch: 1, micro_batch: 1}
strategy: {schedule: zb-h1, pipeline: 1}
)";
  const test::SimRun r = test::run_yaml(yaml);
  constexpr int64_t kMiB = 1024 * 1024;
  for (const Op& op : r.graph.ops()) {
    if (op.kind == OpKind::kBackward) {
      EXPECT_EQ(op.mem_at_end, -6 * kMiB);
    }
    if (op.kind == OpKind::kWeightGrad) {
      EXPECT_EQ(op.mem_at_end, -10 * kMiB);
    }
  }
  // More than the activation, or without a split backward: exit 2, naming the key.
  auto fails = [](const std::string& text, const std::string& what) {
    const auto out = test::cli({"run", test::write_temp("wa.yaml", text)});
    EXPECT_EQ(out.code, 2) << text;
    EXPECT_NE(out.err.find("weight_activation"), std::string::npos) << out.err;
    EXPECT_NE(out.err.find(what), std::string::npos) << out.err;
  };
  std::string more = yaml;
  more.replace(more.find("2 MiB"), 5, "9 MiB");
  fails(more, "more than the layer's activation");
  fails(R"(
cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 1}
model:
  layers:
    - {name: a, forward: 1 ms, backward: 2 ms, activation: 8 MiB, weight_activation: 2 MiB}
training: {global_batch: 1, micro_batch: 1}
strategy: {pipeline: 1}
)",
        "not split");
}

TEST(SplitBackward, CsvProfileColumn) {
  const std::string csv =
      test::write_temp("wa.csv",
                       "name,forward,backward_input,backward_weight,activation,weight_activation\n"
                       "a,1 ms,1 ms,1 ms,8 MiB,3 MiB\n");
  const std::string yaml = test::write_temp("wa-csv.yaml", fmt::format(R"(
cluster: {{gpu: a100-80gb, nodes: 1, gpus_per_node: 1}}
model: {{profile: {}}}
training: {{global_batch: 1, micro_batch: 1}}
strategy: {{schedule: zb-h1, pipeline: 1}}
)",
                                                                       csv));
  const test::SimRun r = test::run_yaml(test::read_file(yaml));
  EXPECT_EQ(*r.scenario.model.layers[0].weight_activation, 3 * 1024 * 1024);
  const std::string bad = test::write_temp(
      "wa-bad.csv",
      "name,forward,backward,activation,weight_activation\na,1 ms,2 ms,8 MiB,3 MiB\n");
  const auto out = test::cli({"run", test::write_temp("wa-bad.yaml", fmt::format(R"(
cluster: {{gpu: a100-80gb, nodes: 1, gpus_per_node: 1}}
model: {{profile: {}}}
training: {{global_batch: 1, micro_batch: 1}}
strategy: {{pipeline: 1}}
)",
                                                                                 bad))});
  EXPECT_EQ(out.code, 2);
  EXPECT_NE(out.err.find("not split"), std::string::npos) << out.err;
}

// Outside the zero-bubble schedules a layer's B and W are one autograd pass, dX and dW layer
// by layer, so the gradient buckets of the last backward close as the pass goes, as
// Megatron-LM's and PyTorch DDP's hooks fire.
TEST(SplitBackward, BucketsCloseDuringTheOnePassBackward) {
  // One stage of 4 layers (t_f = 1 ms, dX 0.5 ms, dW 0.5 ms; 1 M fp32 params = 4 MB of
  // gradients each), two copies joined at 4 GB/s with no latency; M = 1, bucket 8 MB.
  //   F [0,4]; the pass runs layers 3, 2 [4,6]: bucket 0's all-reduce, 2 ring steps of 4 MB
  //   at 4 GB/s, [6,8]; layers 1, 0 [6,8]; bucket 1's [8,10]; optimizer at 10 ms.
  // Were dW of every layer left until after dX (zb-h1's order on one stage), the buckets
  // would close at 7 and 8 ms: all-reduces [7,9] and [9,11], optimizer at 11 ms.
  const std::string yaml = R"(cluster:
  gpu: a100-80gb
  nodes: 1
  gpus_per_node: 2
  intra_node: {kind: nvlink, bandwidth: 4 GB/s, latency: 0 us}
model:
  layers: [{name: l, repeat: 4, forward: 1 ms, backward_input: 0.5 ms, backward_weight: 0.5 ms, params: 1M}]
training: {global_batch: 2, micro_batch: 1}
strategy: {schedule: dapple, pipeline: 1, data: 2, allreduce: ring, bucket: 8 MB}
)";
  const test::SimRun r = test::run_yaml(yaml);
  EXPECT_EQ(r.timeline.makespan, Time::ms(10));
  std::vector<std::pair<Time, Time>> parts;
  for (OpId id : r.graph.stream(0)) {
    if (r.graph.op(id).kind == OpKind::kBackward)
      parts.emplace_back(r.timeline.start[id], r.timeline.end[id]);
  }
  EXPECT_EQ(parts, (std::vector<std::pair<Time, Time>>{{Time::ms(4), Time::ms(6)},
                                                       {Time::ms(6), Time::ms(8)}}));
  std::string zb = yaml;
  zb.replace(zb.find("dapple"), 6, "zb-h1");
  EXPECT_EQ(test::run_yaml(zb).timeline.makespan, Time::ms(11));
  // overlap_grad_reduce: false (the Megatron-LM of 2021): B [4,8], then one all-reduce of
  // all 16 MB, 2 ring steps of 8 MB at 4 GB/s [8,12]: optimizer at 12 ms.
  std::string late = yaml;
  late.replace(late.find("bucket: 8 MB}"), 13, "bucket: 8 MB, overlap_grad_reduce: false}");
  EXPECT_EQ(test::run_yaml(late).timeline.makespan, Time::ms(12));
  // With data-parallel ranks and no ZeRO it takes effect, and no warning says otherwise.
  const auto two = test::cli({"run", test::write_temp("late-data2.yaml", late)});
  EXPECT_EQ(two.code, 0) << two.err;
  EXPECT_EQ(two.err.find("overlap_grad_reduce: no effect"), std::string::npos) << two.err;
  // Under ZeRO-2 every micro-batch's gradients are reduce-scattered as they come: exit 2.
  std::string zero2 = late;
  zero2.replace(zero2.find("bucket:"), 7, "zero: 2, bucket:");
  const auto bad = test::cli({"run", test::write_temp("late-zero2.yaml", zero2)});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("strategy.overlap_grad_reduce"), std::string::npos) << bad.err;
  // Without data-parallel ranks it changes nothing, and says so.
  std::string alone = late;
  alone.replace(alone.find("data: 2"), 7, "data: 1");
  const auto one = test::cli({"run", test::write_temp("late-alone.yaml", alone)});
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.err.find("warning: strategy.overlap_grad_reduce: no effect"), std::string::npos)
      << one.err;
}

// The same under tensor parallelism, where the backward is cut at its collectives: the
// first bucket's reduce-scatter starts while the last backward still runs.
TEST(SplitBackward, BucketsCloseInsideATensorParallelBackward) {
  const std::string yaml = R"(
cluster: {gpu: h100-80gb, nodes: 2, gpus_per_node: 2, intra_node: nvswitch, inter_node: ib-ndr}
model: {generator: transformer, layers: 8, hidden: 2048, heads: 16, sequence: 2048, vocab: 32000}
training: {global_batch: 4, micro_batch: 1, precision: bf16, optimizer: adam}
strategy: {schedule: dapple, pipeline: 1, tensor: 2, data: 2, zero: 1, tensor_overlap: backward,
           bucket: 16 MB}
)";
  const test::SimRun r = test::run_yaml(yaml);
  Time last_backward_end, first_sync_start = Time::max();
  for (OpId id = 0; id < r.graph.size(); ++id) {
    const Op& op = r.graph.op(id);
    if (op.device != 0) continue;
    if (op.kind == OpKind::kBackward)
      last_backward_end = std::max(last_backward_end, r.timeline.end[id]);
  }
  for (OpId id = 0; id < r.graph.size(); ++id) {
    const Op& op = r.graph.op(id);
    // (ranks 0 and 1 are a tensor group, whose reduce-scatters are sequence parallelism's)
    if (op.device == 0 && op.comm == CommKind::kReduceScatter && op.peer >= 2)
      first_sync_start = std::min(first_sync_start, r.timeline.start[id]);
  }
  EXPECT_LT(first_sync_start, last_backward_end);
}

}  // namespace
}  // namespace pipesim
