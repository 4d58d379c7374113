// Generated models: parameter counts against published figures, the activation formula,
// analytic times, and `pipesim model`.
#include "costs/models.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/units.h"
#include "tests/support.h"

namespace pipesim {
namespace {

using test::mixed;
using test::total_params;

const GpuSpec& a100() {
  return *find_gpu_preset("a100-80gb");
}

TEST(Transformer, ParameterCountsMatchPublishedModels) {
  // GPT-3 175B (Brown et al. 2020): 96 layers, h = 12288, 96 heads, seq 2048, vocab 50257,
  // tied embeddings: 96 (12 h^2 + 13 h) + 50257 h + 2048 h (+ 2h final norm) = 174.6 B.
  TransformerShape gpt3{96, 12288, 96, 4 * 12288, 2048, 50257, false, true};
  EXPECT_NEAR(static_cast<double>(total_params(transformer_model(gpt3, mixed(1), a100()))), 174.6e9,
              0.01 * 174.6e9);
  // GPT-2 XL: 48 layers, h = 1600, 25 heads, seq 1024: 1.56 B.
  TransformerShape gpt2xl{48, 1600, 25, 6400, 1024, 50257, false, true};
  EXPECT_NEAR(static_cast<double>(total_params(transformer_model(gpt2xl, mixed(1), a100()))),
              1.558e9, 0.01 * 1.558e9);
  // BERT-large: 24 layers, h = 1024, 16 heads, seq 512, vocab 30522: about 335 M without
  // the pooler and segment embeddings (340 M as usually quoted).
  TransformerShape bert{24, 1024, 16, 4096, 512, 30522, false, true};
  EXPECT_NEAR(static_cast<double>(total_params(transformer_model(bert, mixed(1), a100()))), 340e6,
              0.02 * 340e6);
}

TEST(Transformer, ActivationBytesFollowKorthikanti) {
  // 16-bit: s b h (34 + 5 a s / h). s = 2048, b = 2, h = 4096, a = 32:
  // 16777216 x (34 + 80) = 1912602624 bytes. Flash attention: 34 s b h = 570425344.
  // fp32: 16-bit tensors doubled, one-byte masks unchanged: 66 sbh + 9 a s^2 b.
  TransformerShape t{2, 4096, 32, 16384, 2048, 32000, false, true};
  const int64_t sbh = 2048LL * 2 * 4096, as2b = 32LL * 2048 * 2048 * 2;
  EXPECT_EQ(transformer_model(t, mixed(2), a100()).layers[1].activation_bytes,
            sbh * (34 + 5 * 32 * 2048 / 4096));
  t.flash_attention = true;
  EXPECT_EQ(transformer_model(t, mixed(2), a100()).layers[1].activation_bytes, 34 * sbh);
  t.flash_attention = false;
  Training fp32 = mixed(2);
  fp32.precision = Precision::kFp32;
  EXPECT_EQ(transformer_model(t, fp32, a100()).layers[1].activation_bytes, 66 * sbh + 9 * as2b);
}

TEST(Transformer, GroupedQueryAttentionNarrowsKeysAndValues) {
  // h = 4096, 32 heads of 128 in 8 query groups: keys and values are 8 x 128 = 1024 wide
  // each, so QKV maps 4096 to 4096 + 2 x 1024 = 6144 features.
  //   params: 6144 x 4096 + 6144 (QKV) + 4096^2 + 4096 (projection) + 2 x 4096 x 16384 +
  //           16384 + 4096 (MLP) + 4 x 4096 (norms) = 176,207,872 (MHA: 201,379,840)
  //   FLOPs (b = 1, s = 2048): 2bsh(6144) + 4bs^2h + 2bsh^2 + 4bsh(16384), 3bsh^2 fewer
  //   than MHA's QKV at 2bsh(3h)
  //   activations with flash attention: 34 sbh less the 4 sbh of full-width keys and
  //   values plus 4 sbh / 4: 31 sbh.
  TransformerShape mha{2, 4096, 32, 16384, 2048, 32000, true, true};
  TransformerShape gqa = mha;
  gqa.query_groups = 8;
  const Layer a = transformer_model(mha, mixed(1), a100()).layers[1];
  const Layer g = transformer_model(gqa, mixed(1), a100()).layers[1];
  EXPECT_EQ(a.params, 201'379'840);
  EXPECT_EQ(g.params, 176'207'872);
  const double b = 1, s = 2048, h = 4096;
  EXPECT_DOUBLE_EQ(a.forward_flops - g.forward_flops, 3 * b * s * h * h);
  const int64_t sbh = 2048LL * 4096;
  EXPECT_EQ(a.activation_bytes, 34 * sbh);
  EXPECT_EQ(g.activation_bytes, 31 * sbh);
  // Fewer FLOPs and bytes in QKV and the attention: a shorter layer.
  EXPECT_LT(g.forward, a.forward);
  // Groups must divide the heads.
  const std::string bad = R"(cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 1}
model: {generator: transformer, layers: 1, hidden: 256, heads: 4, query_groups: 3, sequence: 8, vocab: 10}
training: {global_batch: 1, micro_batch: 1}
strategy: {schedule: dapple, pipeline: 1}
)";
  const auto r = test::cli({"run", test::write_temp("gqa-bad.yaml", bad)});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model.query_groups: 3 query groups do not divide 4 heads"),
            std::string::npos)
      << r.err;
}

TEST(Transformer, Fp32GradientsAreMegatronsEighteenBytes) {
  // Megatron-LM under bf16 keeps fp32 main gradients: 2 (weights) + 4 (gradients) + 4
  // (master) + 8 (Adam) = 18 bytes per parameter (Megatron-LM's accounting),
  // against 16 with 16-bit gradients. The gradient all-reduce moves 4 bytes per parameter:
  // a ring of 2 sends 2 (r - 1) = 2 steps of half of them from each rank, 8 bytes in all.
  const std::string yaml =
      R"(cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 2, intra_node: nvswitch2}
model: {generator: transformer, layers: 1, hidden: 256, heads: 4, sequence: 128, vocab: 1024}
training: {global_batch: 2, micro_batch: 1, precision: mixed, gradients: fp32, optimizer: adam}
strategy: {schedule: dapple, pipeline: 1, data: 2, allreduce: ring}
)";
  const test::SimRun r = test::run_yaml(yaml);
  const int64_t params = total_params(r.scenario.model);
  const MemBreakdown& m = r.graph.static_memory(0);
  EXPECT_EQ(m[static_cast<size_t>(MemCategory::kWeights)], 2 * params);
  EXPECT_EQ(m[static_cast<size_t>(MemCategory::kGradients)], 4 * params);
  EXPECT_EQ(m[static_cast<size_t>(MemCategory::kOptimizer)], 12 * params);
  int64_t sent = 0;
  for (const Op& op : r.graph.ops()) sent += op.comm == CommKind::kAllReduce ? op.bytes : 0;
  EXPECT_EQ(sent, 8 * params);
}

TEST(Transformer, TiedEmbeddingsAreCopiedToAStageWithoutThem) {
  // h = 256, vocab 1024: a layer has 12h^2 + 13h = 789,760 parameters, the head 2h = 512
  // (its final norm) and, tied, the embedding's 1024 x 256 = 262,144 table. On two stages
  // {embedding, layer 1}, {layer 2, head} the second keeps its own copy of the table, as
  // Megatron-LM's last stage does: 1,052,416 parameters, 2 bytes each, tied or not. On one
  // stage the table is there once.
  const auto yaml = [](bool tied, bool two) {
    return fmt::format(
        R"(cluster: {{gpu: a100-80gb, nodes: 1, gpus_per_node: 2, intra_node: nvswitch2}}
model: {{generator: transformer, layers: 2, hidden: 256, heads: 4, sequence: 128, vocab: 1024, tie_embeddings: {}}}
training: {{global_batch: 2, micro_batch: 1, precision: mixed, optimizer: adam}}
strategy: {{schedule: dapple, {}}}
)",
        tied, two ? "stages: [{layers: 0-1}, {layers: 2-3}]" : "pipeline: 1");
  };
  const auto weights = [](const test::SimRun& r, int d) {
    return r.graph.static_memory(d)[static_cast<size_t>(MemCategory::kWeights)];
  };
  for (bool tied : {true, false}) {
    const test::SimRun r = test::run_yaml(yaml(tied, true));
    EXPECT_EQ(weights(r, 1), 2 * (789'760 + 512 + 262'144)) << tied;
  }
  const test::SimRun one = test::run_yaml(yaml(true, false));
  const int64_t positions = 128 * 256;
  EXPECT_EQ(weights(one, 0), 2 * (262'144 + positions + 2 * 789'760 + 512));
}

TEST(Transformer, TimesAreTheSumOfPerOpRooflines) {
  // Layer forward FLOPs 24 b s h^2 + 4 b s^2 h with f = 4h: b = 1, s = 1024, h = 1024:
  // 24 x 2^30 + 4 x 2^30 = 28 x 2^30, all of it in the GEMMs (qkv, scores, values,
  // projection, fc1, fc2); the element-wise ops add time, not counted FLOPs.
  TransformerShape t{1, 1024, 16, 4096, 1024, 1000, false, true};
  const Layer l = transformer_model(t, mixed(1), a100()).layers[1];
  const double flops = 28.0 * 1024 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(l.forward_flops, flops);
  ASSERT_EQ(l.ops.size(), 13u);
  double gemm_flops = 0;
  Time f, b, w;
  for (const OpCost& op : l.ops) {
    if (op.matrix) gemm_flops += op.flops;
    f += op.forward;
    b += op.backward_input;
    w += op.backward_weight;
    // Only GEMMs with weights have a weight gradient.
    const bool weights =
        op.name == "qkv" || op.name == "projection" || op.name == "fc1" || op.name == "fc2";
    EXPECT_EQ(op.backward_weight > Time::zero(), weights) << op.name;
  }
  EXPECT_DOUBLE_EQ(gemm_flops, flops);
  EXPECT_EQ(l.forward, f);
  EXPECT_EQ(l.backward_input, b);
  EXPECT_EQ(l.backward_weight, w);
  // fc1: [1024, 1024] x [1024, 4096], 2^33 FLOPs, reads 2 x 2^20 input and 2 x 2^22 weight
  // bytes, writes 2 x 2^22: compute bound. The A100's matrix curve at 8.59 GFLOP lies
  // between (1 GFLOP, 0.442) and (16 GFLOP, 0.663): 0.442 + (8.59 - 1) / 15 x 0.221 = 0.5540.
  const OpCost& fc1 = l.ops[9];
  ASSERT_EQ(fc1.name, "fc1");
  EXPECT_FALSE(fc1.forward_memory_bound);
  const double eff = 0.6 * 0.70 / 0.95 + (std::pow(2.0, 33) - 1e9) / 15e9 * 0.3 * 0.70 / 0.95;
  EXPECT_NEAR(eff, 0.5540, 1e-4);
  EXPECT_EQ(fc1.forward,
            Time::ps(static_cast<int64_t>(std::ceil(std::pow(2.0, 33) / (312e12 * eff) * 1e12))));
  EXPECT_EQ(l.source, "analytic");
}

TEST(Transformer, ScenarioAndModelCommand) {
  const std::string yaml =
      R"(cluster: {gpu: {preset: a100-80gb, efficiency: 0.25}, nodes: 1, gpus_per_node: 4, intra_node: nvswitch2}
model: {generator: transformer, layers: 8, hidden: 1024, heads: 16, sequence: 1024, vocab: 50257}
training: {global_batch: 16, micro_batch: 2, precision: mixed, optimizer: adam}
strategy: {schedule: zb-h1, pipeline: 4}
)";
  const std::string path = test::write_temp("gen.yaml", yaml);
  auto r = test::cli({"model", path, "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["layers"].size(), 10u);  // embedding, 8 layers, head
  // A flat efficiency 0.25 replaces the curves: the GEMMs' 2 x (28 x 2^30) FLOPs for b = 2
  // at 78 TFLOPS are a lower bound of the layer's forward (the element-wise ops add to it).
  EXPECT_GT(j["layers"][1]["forward_s"].get<double>(), 2 * 28.0 * 1024 * 1024 * 1024 / 78e12);
  // The split backward makes zero-bubble schedules available to generated models.
  r = test::cli({"run", path, "--json", "-"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = test::cli({"model", path});
  EXPECT_NE(r.out.find("analytic"), std::string::npos);
  EXPECT_NE(r.out.find("total"), std::string::npos);
  r = test::cli({"model", path, "--set", "model.heads=7"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model.heads: 7 heads do not divide hidden 1024"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

TEST(OptimizerStep, MemoryBoundForGeneratedModelsOrAsGiven) {
  // Mixed-precision Adam touches 2 (grad) + 4 + 4 (master) + 2 x 8 (moments) + 2 (fp16
  // weights) = 28 bytes per parameter; on an A100-80GB (2039 GB/s) a transformer layer of
  // 12 h^2 + 13 h params (h = 1024) takes params x 28 / 2039e9 s.
  Training mixed_adam;
  mixed_adam.precision = Precision::kMixed;
  mixed_adam.optimizer = Optimizer::kAdam;
  EXPECT_EQ(optimizer_bytes_per_param(mixed_adam), 28);
  EXPECT_EQ(optimizer_bytes_per_param(Training{}), 12);  // fp32 SGD: 4 + 4 + 4
  // Megatron-LM's fp32 main gradients: the update reads 4 bytes of gradient, not 2.
  mixed_adam.fp32_gradients = true;
  EXPECT_EQ(optimizer_bytes_per_param(mixed_adam), 30);
  const std::string yaml =
      R"(cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 2, intra_node: nvswitch2}
model: {generator: transformer, layers: 2, hidden: 1024, heads: 16, sequence: 512, vocab: 1000}
training: {global_batch: 4, micro_batch: 1, precision: mixed, optimizer: adam}
strategy: {schedule: dapple, pipeline: 2}
)";
  const Scenario s = load_scenario_text(yaml, "opt.yaml");
  const int64_t p = 12 * 1024 * 1024 + 13 * 1024;
  EXPECT_EQ(s.model.layers[1].params, p);
  EXPECT_EQ(s.model.layers[1].optimizer, serialization_time(p * 28, 2039e9));
  // Given for the whole model: spread by parameters.
  const Scenario given =
      load_scenario_text(yaml, "opt.yaml", {{"training.optimizer_step", "10 ms"}});
  int64_t total = 0;
  for (const Layer& l : given.model.layers) total += l.params;
  EXPECT_EQ(given.model.layers[1].optimizer,
            Time::ps(static_cast<int64_t>(static_cast<long double>(Time::ms(10).ps_count()) * p /
                                          total)));
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

TEST(Profile, CsvLayersWithUnitsAndLocatedErrors) {
  const std::string csv =
      "name, forward, backward_input, backward_weight, activation, output, params, repeat\n"
      "embed, 0.2 ms, 0.2 ms, 0.2 ms, 16 MiB, 8 MiB, 30M, 1\n"
      "block, 1.5 ms, 1.5 ms, 1.5 ms, 200 MiB, 8 MiB, 12.6M, 3\n";
  test::write_temp("prof.csv", csv);
  const std::string yaml =
      R"(cluster: {gpu: a100-40gb, nodes: 1, gpus_per_node: 2, intra_node: nvlink3}
model: {profile: prof.csv}
training: {global_batch: 8, micro_batch: 4}
strategy: {schedule: zb-h1, pipeline: 2}
)";
  const Scenario s = load_scenario_file(test::write_temp("prof.yaml", yaml));
  ASSERT_EQ(s.model.layers.size(), 4u);  // embed + 3 blocks
  EXPECT_EQ(s.model.layers[2].name, "block.1");
  EXPECT_EQ(s.model.layers[2].backward_weight, Time::us(1500));
  EXPECT_TRUE(s.model.layers[2].split_backward);  // so zero-bubble schedules accept it
  EXPECT_EQ(s.model.layers[3].params, 12'600'000);
  EXPECT_EQ(s.model.name, "prof");
  // A bad cell names the CSV file, its line and column, and the column's key.
  test::write_temp("prof.csv", "name, forward, backward\nx, 1 ms, 2 parsecs\n");
  const auto r = test::cli({"run", test::temp_path("prof.yaml")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("prof.csv:2:10: model.profile.backward: unknown unit 'parsecs'"),
            std::string::npos)
      << r.err;
  test::write_temp("prof.csv", "name, forwrd, backward\n");
  EXPECT_NE(test::cli({"run", test::temp_path("prof.yaml")})
                .err.find("unknown column 'forwrd'; did you mean 'forward'?"),
            std::string::npos);
  // A column given twice (once: the last one won, silently).
  test::write_temp("prof.csv", "name,forward,backward,forward\nx,1 ms,2 ms,3 ms\n");
  EXPECT_NE(test::cli({"run", test::temp_path("prof.yaml")})
                .err.find("prof.csv:1:23: model.profile: the column 'forward' is given twice"),
            std::string::npos);
}

}  // namespace
}  // namespace pipesim
