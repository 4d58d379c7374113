// PyTorch's per-op selective checkpointing as a whole-layer recompute module
// (strategy.recompute_modules: [alternate_gemms]; torchtitan's `op` policy). Shares and
// bytes hand-worked below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "costs/models.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

// s = 1024, b = 2 (S = 2048 tokens), h = 512, 8 heads of 64 (queries 512 wide, keys and
// values 512 each), SwiGLU of f = 1536, bf16 (e = 2), flash attention.
constexpr double kS = 2048, kH = 512, kQ = 512, kKv = 512, kF = 1536, kE = 2;

Model dense_model(Precision p = Precision::kMixed) {
  TransformerShape t;
  t.layers = 4;
  t.hidden = 512;
  t.heads = 8;
  t.ffn = 1536;
  t.sequence = 1024;
  t.vocab = 1000;
  t.mlp = TransformerShape::Mlp::kSwiglu;
  t.norm = TransformerShape::Norm::kRmsNorm;
  t.position = TransformerShape::Position::kRotary;
  t.flash_attention = true;
  Training tr;
  tr.micro_batch = 2;
  tr.precision = p;
  return transformer_model(t, tr, *find_gpu_preset("h100-80gb"));
}

const RecomputePart& part_of(const Layer& l, RecomputeModule m) {
  const auto it = std::find_if(l.recompute_parts.begin(), l.recompute_parts.end(),
                               [m](const RecomputePart& p) { return p.module == m; });
  EXPECT_NE(it, l.recompute_parts.end());
  return *it;
}

const OpCost& op_of(const Layer& l, const std::string& name) {
  const auto it =
      std::find_if(l.ops.begin(), l.ops.end(), [&](const OpCost& op) { return op.name == name; });
  EXPECT_NE(it, l.ops.end()) << name;
  return *it;
}

// Every op of the layer but the attention kernel, whole.
Time all_but_attention(const Layer& l) {
  Time t;
  for (const OpCost& op : l.ops)
    if (op.name != "flash_attention") t += op.forward;
  return t;
}

TEST(OpPolicy, AlternateGemmsReRunTheSecondFourthAndSixth) {
  const Model m = dense_model();
  const Layer& l = m.layers[1];
  const RecomputePart& p = part_of(l, RecomputeModule::kAlternateGemms);
  // Of wq, wk, wv, wo, w1, w3, w2: wk (512 of QKV's 1536 columns), wo, w3 (half of fc1's
  // fused 2f), and every element-wise op; not w2 (fc2) nor the attention kernel.
  const Time expected = all_but_attention(l) - op_of(l, "qkv").forward - op_of(l, "fc1").forward -
                        op_of(l, "fc2").forward +
                        share_of(op_of(l, "qkv").forward, kKv / (kQ + 2 * kKv)) +
                        share_of(op_of(l, "fc1").forward, 0.5);
  EXPECT_EQ(p.cost.forward, expected);
  EXPECT_EQ(std::count(p.ops.begin(), p.ops.end(), "fc2"), 0);
  // 2 S h (512 + 512 + 1536): the keys, the output projection and the up projection.
  EXPECT_DOUBLE_EQ(p.cost.flops, 2 * kS * kH * (kKv + kQ + kF));
  // Kept: the input, the queries, the values, the attention output, w1's output and w2's:
  // S (h + q + kv + q + f + h) e = 2048 x 4096 x 2 bytes.
  const double kept = kS * (kH + kQ + kKv + kQ + kF + kH) * kE;
  EXPECT_EQ(l.activation_bytes - p.cost.bytes, static_cast<int64_t>(kept));
  EXPECT_GT(p.cost.bytes, 0);
  // Without sequence parallelism each tensor rank holds Korthikanti's 5 S h e whole (norm
  // inputs and outputs, dropout masks); all but the layer's input S h e is freed.
  EXPECT_EQ(l.tp_replicated_activation, static_cast<int64_t>(5 * kS * kH * kE));
  EXPECT_EQ(p.cost.replicated_bytes, static_cast<int64_t>(4 * kS * kH * kE));
  // Under fp8 the same GEMMs and every cast: the shares do not change with the precision.
  const Model m8 = dense_model(Precision::kFp8);
  const Layer& f8 = m8.layers[1];
  const RecomputePart& p8 = part_of(f8, RecomputeModule::kAlternateGemms);
  EXPECT_DOUBLE_EQ(p8.cost.flops, p.cost.flops);
  EXPECT_EQ(std::count(p8.ops.begin(), p8.ops.end(), "cast_fc2"), 1);
}

TEST(OpPolicy, SharesHoldAtATensorDegree) {
  const Model m = dense_model();
  const Layer x = m.layers[1].at_tensor_degree(2, 1, 1, 1);
  const Layer whole = m.layers[1];
  const RecomputePart& alt = part_of(x, RecomputeModule::kAlternateGemms);
  EXPECT_GT(alt.cost.forward, Time::zero());
  EXPECT_LT(alt.cost.forward, x.forward);  // the attention kernel and the saved GEMMs are not
  // The part at a degree is the whole layer's, as the layer's own times are (the lowering
  // divides by the degree): its t shards, each at the efficiency of its smaller size, so a
  // little slower in all than one GPU's whole ops, and the same share of the layer's
  // forward within a few points (the whole ops instead of their shares would add most of
  // QKV and fc1).
  const RecomputePart& one = part_of(whole, RecomputeModule::kAlternateGemms);
  const double ratio = alt.cost.forward.seconds() / one.cost.forward.seconds();
  EXPECT_GE(ratio, 1.0);
  EXPECT_LT(ratio, 1.2);
  EXPECT_NEAR(alt.cost.forward.seconds() / x.forward.seconds(),
              one.cost.forward.seconds() / whole.forward.seconds(), 0.03);
}

TEST(OpPolicy, NoneOnMoeOrLatentLayers) {
  TransformerShape t;
  t.layers = 2;
  t.hidden = 512;
  t.heads = 8;
  t.ffn = 1536;
  t.sequence = 1024;
  t.vocab = 1000;
  t.experts = 4;
  t.top_k = 2;
  t.expert_ffn = 256;
  Training tr;
  tr.micro_batch = 1;
  const Model m = transformer_model(t, tr, *find_gpu_preset("h100-80gb"));
  for (const RecomputePart& p : m.layers[1].recompute_parts) {
    EXPECT_NE(p.module, RecomputeModule::kAlternateGemms);
  }
}

std::string scenario(const std::string& strategy, const std::string& model_extra = "") {
  return "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 2, intra_node: nvswitch3}\n"
         "model: {generator: transformer, layers: 4, hidden: 512, heads: 8, sequence: 1024, "
         "vocab: 1000, mlp: swiglu, norm: rmsnorm, position: rotary, flash_attention: true" +
         model_extra +
         "}\ntraining: {global_batch: 8, micro_batch: 2, precision: bf16, optimizer: adam}\n"
         "strategy: {schedule: 1f1b, pipeline: 2, " +
         strategy + "}\n";
}

TEST(OpPolicy, TimeForMemoryEndToEnd) {
  const auto run = [](const std::string& s) {
    return test::run_yaml(scenario(s), /*record_memory=*/true);
  };
  const test::SimRun none = run("recompute: none");
  const test::SimRun alt = run("recompute: selective, recompute_modules: [alternate_gemms]");
  const test::SimRun full = run("recompute: full");
  EXPECT_LT(none.report.makespan, alt.report.makespan);
  EXPECT_LT(alt.report.makespan, full.report.makespan);
  for (int d = 0; d < 2; ++d) {
    EXPECT_LT(test::peak_activation_bytes(alt, d), test::peak_activation_bytes(none, d));
    EXPECT_LT(test::peak_activation_bytes(full, d), test::peak_activation_bytes(alt, d));
  }
  EXPECT_TRUE(alt.report.info.warnings.empty());
}

TEST(OpPolicy, AloneOrNotAtAll) {
  const auto run = [](const std::string& strategy, const std::string& model = "") {
    return test::cli({"run", test::write_temp("op-policy.yaml", scenario(strategy, model))});
  };
  auto r = run("recompute: selective, recompute_modules: [alternate_gemms, mlp]");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("strategy.recompute_modules"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no other module"), std::string::npos) << r.err;
  r = run("recompute: selective, recompute_modules: [core_attn, alternate_gemms]");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("[alternate_gemms] alone"), std::string::npos) << r.err;
  // Dense layers before MoE ones: the MoE layers keep everything, said.
  r = run("recompute: selective, recompute_modules: [alternate_gemms]",
          ", experts: 4, top_k: 2, expert_ffn: 256, dense_first: 2");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("dense layers only: 2 MoE or latent-attention layers"), std::string::npos)
      << r.err;
  // On MoE layers: nothing to re-run, said.
  r = run("recompute: selective, recompute_modules: [alternate_gemms]",
          ", experts: 4, top_k: 2, expert_ffn: 256");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("alternate_gemms: no effect"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pipesim
