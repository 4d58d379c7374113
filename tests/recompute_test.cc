// strategy.recompute (SPEC section 3.1): full and selective recompute in every synchronous
// schedule, per stage, with Korthikanti et al.'s activation memory (arXiv 2205.05198).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "costs/models.h"
#include "schedules/lower.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

using test::PipeSpec;

constexpr int64_t kMiB = 1024 * 1024;

std::string order_of(const PipeSpec& p) {
  const auto r = test::cli({"order", test::write_temp("recompute-order.yaml", test::to_yaml(p))});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

// Two layers of s = 2048, b = 1, h = 1024, a = 16, 16-bit (layers 1 and 2 of the model;
// layer 0 is the embedding, layer 3 the output layer).
Model small_transformer() {
  TransformerShape t;
  t.layers = 2;
  t.hidden = 1024;
  t.heads = 16;
  t.ffn = 4096;
  t.sequence = 2048;
  t.vocab = 1000;
  Training tr;
  tr.micro_batch = 1;
  tr.precision = Precision::kMixed;
  return transformer_model(t, tr, *find_gpu_preset("a100-80gb"));
}

TEST(Recompute, KorthikantiTableTwoPerLayer) {
  // One transformer layer, 16-bit, no tensor parallelism (Table 2, t = 1): s = 2048,
  // b = 1, h = 1024, a = 16. Kept from F to B per layer: none 34sbh + 5as^2b, selective
  // 34sbh, full 2sbh (the layer's input).
  const Model m = small_transformer();
  const int64_t sbh = 2048LL * 1024, as2b = 16LL * 2048 * 2048;
  const std::vector<StageSpec> layer2{{2, 2, 1}};  // layer 0 is the embedding
  auto kept = [&](Recompute r) { return stage_profiles(m, layer2, {r})[0].kept_bytes; };
  EXPECT_EQ(m.layers[2].activation_bytes, 34 * sbh + 5 * as2b);
  EXPECT_EQ(kept(Recompute::kSelective), 34 * sbh);
  EXPECT_EQ(kept(Recompute::kFull), 2 * sbh);
  // Selective re-runs the attention core: QK^T, softmax, dropout and attention over values
  // (ops 2 to 5 of the layer, after ln1 and qkv), 4bs^2h GEMM FLOPs.
  const auto& ops = m.layers[2].ops;
  ASSERT_GE(ops.size(), 6u);
  EXPECT_EQ(ops[2].name, "scores");
  EXPECT_EQ(ops[5].name, "values");
  EXPECT_DOUBLE_EQ(ops[2].flops + ops[5].flops, 4.0 * 2048 * 2048 * 1024);
  EXPECT_EQ(stage_profiles(m, layer2, {Recompute::kSelective})[0].recompute_time,
            ops[2].forward + ops[3].forward + ops[4].forward + ops[5].forward);
  EXPECT_EQ(stage_profiles(m, layer2, {Recompute::kFull})[0].recompute_time, m.layers[2].forward);
}

TEST(Recompute, FullLeavesTheEmbeddingAndTheOutputLayerAlone) {
  // Megatron-LM's and DeepSpeed's full recompute checkpoints the transformer layers only:
  // a stage holding the embedding (layer 0), a layer and the output layer (layer 3) re-runs
  // the layer's forward alone, and keeps the embedding's and the head's activations whole
  // next to the layer's input (2sbh bytes at 16 bits).
  const Model m = small_transformer();
  ASSERT_EQ(m.layers.size(), 4u);
  EXPECT_FALSE(m.layers[0].recomputed);
  EXPECT_TRUE(m.layers[1].recomputed);
  EXPECT_FALSE(m.layers[3].recomputed);
  const int64_t sbh = 2048LL * 1024;
  for (const auto& [first, last] : {std::pair{0, 1}, std::pair{2, 3}}) {
    const StageSpec st{first, last, 1};
    const StageProfile full = stage_profiles(m, {st}, {Recompute::kFull})[0];
    const int layer = first == 0 ? 1 : 2;
    const int other = first == 0 ? 0 : 3;
    EXPECT_EQ(full.recompute_time, m.layers[static_cast<size_t>(layer)].forward);
    EXPECT_EQ(full.kept_bytes, 2 * sbh + m.layers[static_cast<size_t>(other)].activation_bytes);
  }
}

TEST(Recompute, OneFOneBOrderAndClosedForm) {
  // Full recompute under 1F1B: R right before each B; uniform stages without transfers
  // give (M + S - 1)(2 t_f + t_b) = 11 x 4 = 44 ms, as GPipe with recompute.
  PipeSpec p;
  p.tb_ms = {2.0};
  p.strategy_extra = "  recompute: full\n";
  EXPECT_NE(order_of(p).find("dev0: F0 F1 F2 F3 R0 B0 F4 R1 B1"), std::string::npos);
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::ms(44));
  p.schedule = "gpipe";
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, Time::ms(44));
  // ZB-H1: R before B, W still deferred.
  p.schedule = "zb-h1";
  p.tb_ms = {1.0};
  p.tw_ms = {1.0};
  EXPECT_NE(order_of(p).find("dev0: F0 F1 F2 F3 R0 B0 W0 F4"), std::string::npos);
}

TEST(Recompute, OneFOneBMemory) {
  // One layer per stage, 10 MiB of activations, 1 MiB outputs; S = 4, M = 8, 1F1B with full
  // recompute. Stage s > 0 keeps its 1 MiB input for each of its S - s micro-batches in
  // flight and re-allocates 9 MiB while it recomputes: during its (S - s)-th forward it
  // holds (S - s - 1) x 1 + 10 MiB, the peak. Stage 0's input is 0 bytes: 10 MiB.
  PipeSpec p;
  p.activation = "10 MiB";
  p.output = "1 MiB";
  p.strategy_extra = "  recompute: full\n";
  const test::SimRun r = test::run_pipe(p);
  EXPECT_EQ(test::peak_activation_bytes(r, 0), 10 * kMiB);
  for (int s = 1; s < 4; ++s)
    EXPECT_EQ(test::peak_activation_bytes(r, s), (4 - s - 1 + 10) * kMiB) << s;
  // Without recompute: min(S - s, M) x 10 MiB.
  p.strategy_extra.clear();
  const test::SimRun n = test::run_pipe(p);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(test::peak_activation_bytes(n, s), (4 - s) * 10 * kMiB);
}

TEST(Recompute, PerStageAndValidation) {
  // Only stage 0 recomputes.
  PipeSpec p;
  p.stages = 2;
  p.micro_batches = 2;
  p.strategy_extra = "";
  std::string y = test::to_yaml(p);
  y.replace(y.find("  pipeline: 2\n"), 14,
            "  stages:\n    - {layers: 0-0, recompute: full}\n    - {layers: 1-1}\n");
  const auto r = test::cli({"order", test::write_temp("recompute-stage.yaml", y)});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "dev0: F0 F1 R0 B0 R1 B1\ndev1: F0 B0 F1 B1\n");
  // Asynchronous schedules recompute too (SPEC: any schedule may): PipeDream's order for
  // 2 stages and 2 micro-batches (stage 0 warms up with S - 1 = 1 extra forward) with R(m)
  // right before each B(m).
  p.schedule = "pipedream";
  p.strategy_extra = "  recompute: full\n";
  const auto async =
      test::cli({"order", test::write_temp("recompute-async.yaml", test::to_yaml(p))});
  ASSERT_EQ(async.code, 0) << async.err;
  EXPECT_EQ(async.out, "dev0: F0 F1 R0 B0 R1 B1\ndev1: F0 R0 B0 F1 R1 B1\n");
  // gpipe-recompute is full already.
  p.schedule = "gpipe-recompute";
  p.strategy_extra = "  recompute: selective\n";
  const auto bad = test::cli({"run", test::write_temp("recompute-bad2.yaml", test::to_yaml(p))});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("gpipe-recompute is gpipe with full recompute"), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace pipesim
