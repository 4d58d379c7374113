// Today's transformer layers (SPEC v3 section 9): gated MLPs, RMSNorm, rotary positions,
// and the model presets built from them, worked by hand.
#include <gtest/gtest.h>

#include "costs/models.h"
#include "scenario/scenario.h"
#include "tests/support.h"

namespace pipesim {
namespace {

using Shape = TransformerShape;

using test::mixed;
using test::total_params;

const GpuSpec& h100() {
  return *find_gpu_preset("h100-80gb");
}

const OpCost* op_named(const Layer& l, const std::string& name) {
  for (const OpCost& op : l.ops)
    if (op.name == name) return &op;
  return nullptr;
}

// A Llama-shaped layer: h = 4096, 32 heads in 8 groups (keys and values 1024 wide each),
// SwiGLU ffn 14336, RMSNorm, rotary; s = 2048, b = 1, no flash attention.
Shape llama_like() {
  Shape t{2, 4096, 32, 14336, 2048, 128256, false, false, 8};
  t.mlp = Shape::Mlp::kSwiglu;
  t.norm = Shape::Norm::kRmsNorm;
  t.position = Shape::Position::kRotary;
  return t;
}

TEST(ModernLayers, SwigluLayerByHand) {
  const Layer x = transformer_model(llama_like(), mixed(1), h100()).layers[1];
  // Parameters: QKV 4096 x 6144 + 6144, projection 4096^2 + 4096, gate and value
  // 2 x 4096 x 14336 + 2 x 14336, down 14336 x 4096 + 4096, two RMSNorm scales 2 x 4096:
  // 25,165,824 + 6,144 + 16,777,216 + 4,096 + 176,160,768 + 28,672 + 4,096 + 8,192.
  EXPECT_EQ(x.params, 218'155'008);
  // Forward FLOPs: 2bsh(h + 2048) + 4bs^2h + 2bsh^2 + 6bshf, the MLP's three GEMMs at
  // 2bshf each.
  const double b = 1, s = 2048, h = 4096, f = 14336;
  EXPECT_DOUBLE_EQ(x.forward_flops, 2 * b * s * h * (h + 2048) + 4 * b * s * s * h +
                                        2 * b * s * h * h + 6 * b * s * h * f);
  // Activations, 16-bit: the norms' inputs, QKV's and fc1's inputs, the queries and the
  // projection's input (12 sbh), keys and values (2 x 2 x 1024 sb = sbh), the gate and
  // value (4 sbf) and their product (2 sbf), the s^2 tensors (4as^2b + as^2b mask) and the
  // two dropout masks (2 sbh): sb(15h + 6f) + 5as^2b.
  const int64_t sb = 2048, sbh = sb * 4096, as2b = 32LL * 2048 * 2048;
  EXPECT_EQ(x.activation_bytes, 15 * sbh + 6 * sb * 14336 + 5 * as2b);
  // W reads each GEMM's input and output gradient: QKV h + 1.5h, projection h + h, gate
  // and value h + 2f, down f + h, in 16-bit elements.
  EXPECT_EQ(*x.weight_activation,
            2 * (sb * (4096 + 6144) + sbh * 2 + sb * (4096 + 2 * 14336) + sb * (14336 + 4096)));
  // The gated activation reads the gate and the value and writes the product: 3 x 2 bytes
  // per ffn element; rotary runs over the queries and keys (1.25 h per token at 8 groups).
  ASSERT_NE(op_named(x, "swiglu"), nullptr);
  EXPECT_DOUBLE_EQ(op_named(x, "swiglu")->bytes, 6.0 * sb * 14336);
  ASSERT_NE(op_named(x, "rotary"), nullptr);
  EXPECT_DOUBLE_EQ(op_named(x, "rotary")->bytes, 4.0 * 1.25 * sbh);
  EXPECT_EQ(op_named(x, "gelu"), nullptr);
}

TEST(ModernLayers, NormsAndPositions) {
  Shape t = llama_like();
  const Model rms = transformer_model(t, mixed(1), h100());
  t.norm = Shape::Norm::kLayerNorm;
  const Model ln = transformer_model(t, mixed(1), h100());
  // LayerNorm's bias: one more h per norm, two per layer, one in the head.
  EXPECT_EQ(ln.layers[1].params - rms.layers[1].params, 2 * 4096);
  EXPECT_EQ(ln.layers.back().params - rms.layers.back().params, 4096);
  // RMSNorm: half the FLOPs of LayerNorm, the same bytes.
  EXPECT_LT(op_named(rms.layers[1], "ln1")->forward,
            op_named(ln.layers[1], "ln1")->forward + Time::ps(1));
  EXPECT_DOUBLE_EQ(op_named(rms.layers[1], "ln1")->bytes, op_named(ln.layers[1], "ln1")->bytes);
  // Rotary and none keep no position table; learned positions add s x h to the embedding.
  t.position = Shape::Position::kNone;
  const Model none = transformer_model(t, mixed(1), h100());
  EXPECT_EQ(op_named(none.layers[1], "rotary"), nullptr);
  EXPECT_EQ(none.layers.front().params, 128256LL * 4096);
  EXPECT_EQ(rms.layers.front().params, 128256LL * 4096);
  t.position = Shape::Position::kLearned;
  EXPECT_EQ(transformer_model(t, mixed(1), h100()).layers.front().params,
            128256LL * 4096 + 2048LL * 4096);
  // GeGLU costs what SwiGLU does but its activation (GeLU, 9 FLOPs per element, not 6).
  t.mlp = Shape::Mlp::kGeglu;
  const Layer geglu = transformer_model(t, mixed(1), h100()).layers[1];
  EXPECT_EQ(geglu.params, ln.layers[1].params);
  EXPECT_NE(op_named(geglu, "geglu"), nullptr);
}

TEST(ModernLayers, GeluMlpKeepsKorthikantisCount) {
  // f = 4h: 12 sbh + 4 sbf = 28 sbh of tensors, with keys and values 32: 34 sbh + 5as^2b.
  Shape t{2, 1024, 16, 4096, 1024, 32000, false, true};
  const Layer x = transformer_model(t, mixed(2), h100()).layers[1];
  const int64_t sbh = 1024LL * 2 * 1024, as2b = 16LL * 1024 * 1024 * 2;
  EXPECT_EQ(x.activation_bytes, 34 * sbh + 5 * as2b);
  // A different ffn moves only the MLP's 4 sbf.
  t.ffn = 3000;
  EXPECT_EQ(transformer_model(t, mixed(2), h100()).layers[1].activation_bytes,
            18 * sbh + 4LL * 1024 * 2 * 3000 + 5 * as2b);
}

TEST(ModelPresets, ParameterCountsWithinHalfAPercent) {
  // Published counts: Llama 3 8B 8.03 B, 70B 70.6 B, Llama 3.1 405B 405 B (arXiv
  // 2407.21783 and the models' cards), GPT-3 175.0 B (arXiv 2005.14165, Table 2.1).
  const std::pair<const char*, double> presets[] = {{"llama3-8b", 8.03e9},
                                                    {"llama3-70b", 70.6e9},
                                                    {"llama3.1-405b", 405e9},
                                                    {"gpt3-175b", 175.0e9}};
  for (const auto& [name, published] : presets) {
    const std::string yaml = fmt::format(
        "cluster: {{gpu: h100-80gb, nodes: 1, gpus_per_node: 1}}\nmodel: {{include: {}}}\n"
        "training: {{global_batch: 1, micro_batch: 1, precision: mixed}}\n"
        "strategy: {{schedule: dapple, pipeline: 1}}\n",
        name);
    const Scenario s = load_scenario_text(yaml, "preset.yaml");
    const auto params = static_cast<double>(total_params(s.model));
    EXPECT_NEAR(params, published, 0.005 * published) << name;
  }
}

TEST(ModelPresets, AnIncludeTakesShapeOverrides) {
  // Llama 3 8B at 4096 tokens instead of 8192: the same layers and parameters, half the
  // tokens per sample; a layer's activations hold 18sbh + 6sbf (SwiGLU, flash attention)
  // elements' bytes, linear in s, so exactly half.
  const auto load = [](const std::string& model) {
    return load_scenario_text(
        "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 1}\nmodel: " + model +
            "\ntraining: {global_batch: 1, micro_batch: 1, precision: bf16}\n"
            "strategy: {schedule: dapple, pipeline: 1}\n",
        "include.yaml");
  };
  const Scenario base = load("{include: llama3-8b}");
  const Scenario short_seq = load("{include: llama3-8b, sequence: 4096, name: llama3-8b-4k}");
  EXPECT_EQ(short_seq.model.name, "llama3-8b-4k");
  EXPECT_EQ(total_params(short_seq.model), total_params(base.model));
  EXPECT_EQ(short_seq.model.layers[1].activation_bytes * 2, base.model.layers[1].activation_bytes);
  // Only a generated model has a shape to override.
  const auto r = test::cli(
      {"run", test::write_temp("include-bad.yaml",
                               "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 1}\n"
                               "model: {include: vgg19, sequence: 4096}\n"
                               "training: {global_batch: 1, micro_batch: 1}\n"
                               "strategy: {schedule: dapple, pipeline: 1}\n")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model.sequence: only a generated model's shape"), std::string::npos)
      << r.err;
}

TEST(ModernLayers, BadValuesNameTheKey) {
  const auto r = test::cli(
      {"run", test::write_temp("mlp-bad.yaml",
                               "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 1}\n"
                               "model: {generator: transformer, layers: 1, hidden: 64, heads: 4, "
                               "sequence: 8, vocab: 10, mlp: relu}\n"
                               "training: {global_batch: 1, micro_batch: 1}\n"
                               "strategy: {schedule: dapple, pipeline: 1}\n")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model.mlp"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("swiglu"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

using test::round_gpu;

// Each kind of op on its own curve: GEMMs, fp8 GEMMs, fused attention (on its causal
// FLOPs). The round GPU with constant curves: 16-bit GEMMs at 0.5 of 100 TFLOPS, fp8
// GEMMs at 0.4 of 200 TFLOPS, attention at 0.125 of 100 TFLOPS, memory at 1 TB/s.
TEST(Curves, EachKindOfOpOnItsOwnCurve) {
  GpuSpec gpu = round_gpu();
  gpu.matrix_efficiency = EfficiencyCurve::constant(0.5);
  gpu.fp8_efficiency = EfficiencyCurve::constant(0.4);
  gpu.attention_efficiency = EfficiencyCurve::constant(0.125);
  gpu.memory_efficiency = EfficiencyCurve::constant(1.0);
  // h = 1024, 8 heads, s = 1024, b = 1, flash attention.
  const Shape t{1, 1024, 8, 4096, 1024, 1000, true, true};
  const Layer x = transformer_model(t, mixed(1), gpu).layers[1];
  // Causal fused attention: 2bs^2h = 2,147,483,648 FLOPs forward at 12.5 TFLOPS =
  // 171,798,691.84 ps; the backward 5bs^2h = 429,496,729.6 ps (rounded up).
  const OpCost* att = op_named(x, "flash_attention");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->forward, Time::ps(171'798'692));
  EXPECT_EQ(att->backward_input, Time::ps(429'496'730));
  // An encoder's fused attention (causal: false) runs every block: twice the FLOPs.
  Shape enc = t;
  enc.causal = false;
  EXPECT_EQ(op_named(transformer_model(enc, mixed(1), gpu).layers[1], "flash_attention")->forward,
            Time::ps(343'597'384));  // 4,294,967,296 FLOPs at 12.5 TFLOPS
  // QKV, 2mkn = 6,442,450,944 FLOPs: at 50 TFLOPS in 16-bit, 128,849,018.88 ps; in fp8 at
  // 80 TFLOPS, 80,530,636.8 ps.
  EXPECT_EQ(op_named(x, "qkv")->forward, Time::ps(128'849'019));
  Training fp8 = mixed(1);
  fp8.precision = Precision::kFp8;
  const Layer y = transformer_model(t, fp8, gpu).layers[1];
  EXPECT_EQ(op_named(y, "qkv")->forward, Time::ps(80'530'637));
  // fp8 leaves attention in 16-bit, on its own curve.
  EXPECT_EQ(op_named(y, "flash_attention")->forward, Time::ps(171'798'692));
}

// The Triton kernel (attention_kernel: triton) on its own curve, each head computed at
// its width padded to a power of two. The round GPU: the CUDA kernels at 0.125 of
// 100 TFLOPS, the Triton kernel at 0.1. h = 640, 8 heads of 80 (padded to 128), s = 1024,
// b = 1, causal: 2bs^2h = 1,342,177,280 FLOPs of the model, 2bs^2 x 8 x 128 =
// 2,147,483,648 computed, at 10 TFLOPS 214,748,364.8 ps forward, 536,870,912 backward
// (2.5x). The CUDA kernel: 1,342,177,280 at 12.5 TFLOPS, 107,374,182.4 ps.
TEST(Curves, TritonAttentionPadsHeadsAndHasItsOwnCurve) {
  GpuSpec gpu = round_gpu();
  gpu.attention_efficiency = EfficiencyCurve::constant(0.125);
  gpu.triton_attention_efficiency = EfficiencyCurve::constant(0.1);
  gpu.memory_efficiency = EfficiencyCurve::constant(1.0);
  Shape t{1, 640, 8, 2560, 1024, 1000, true, true};
  EXPECT_EQ(op_named(transformer_model(t, mixed(1), gpu).layers[1], "flash_attention")->forward,
            Time::ps(107'374'183));
  t.attention_kernel = AttentionKernel::kTriton;
  const Layer x = transformer_model(t, mixed(1), gpu).layers[1];
  const OpCost* att = op_named(x, "flash_attention");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->forward, Time::ps(214'748'365));
  EXPECT_EQ(att->backward_input, Time::ps(536'870'912));
  // The model's FLOPs (MFU's numerator) stay the unpadded ones.
  EXPECT_EQ(x.forward_flops,
            transformer_model(Shape{1, 640, 8, 2560, 1024, 1000, true, true}, mixed(1), gpu)
                .layers[1]
                .forward_flops);
}

// attention_kernel names a fused kernel: with unfused attention, or heads wider than the
// Triton kernel takes (128), it is bad input naming the key.
TEST(Curves, AttentionKernelNeedsAFusedKernelItCanRun) {
  const auto run = [](const std::string& model) {
    return test::cli(
        {"run", test::write_temp("kernel-bad.yaml",
                                 "cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 1}\n"
                                 "model: {generator: transformer, layers: 1, sequence: 64, "
                                 "vocab: 10, " +
                                     model +
                                     "}\n"
                                     "training: {global_batch: 1, micro_batch: 1}\n"
                                     "strategy: {schedule: dapple, pipeline: 1}\n")});
  };
  const auto unfused = run("hidden: 512, heads: 4, attention_kernel: triton");
  EXPECT_EQ(unfused.code, 2);
  EXPECT_NE(unfused.err.find("model.attention_kernel"), std::string::npos) << unfused.err;
  EXPECT_NE(unfused.err.find("flash_attention: true"), std::string::npos) << unfused.err;
  const auto wide =
      run("hidden: 1024, heads: 4, flash_attention: true, attention_kernel: triton");
  EXPECT_EQ(wide.code, 2);
  EXPECT_NE(wide.err.find("up to 128 wide, not 256"), std::string::npos) << wide.err;
  const auto bad = run("hidden: 512, heads: 4, flash_attention: true, attention_kernel: xla");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("triton"), std::string::npos) << bad.err;
  const auto fine =
      run("hidden: 512, heads: 4, flash_attention: true, attention_kernel: triton");
  EXPECT_EQ(fine.code, 0) << fine.err;
}

// A GPU without a preset that gives only matrix_efficiency uses it for fp8 GEMMs and
// attention too; a preset keeps its own attention and fp8 curves.
TEST(Curves, CustomGpuMatrixCurveServesAttentionAndFp8) {
  const auto model = [](const std::string& gpu) {
    return test::cli(
        {"model", "--ops",
         test::write_temp("curves.yaml", "cluster: {gpu: " + gpu +
                                             ", nodes: 1, gpus_per_node: 1}\n"
                                             "model: {generator: transformer, layers: 1, "
                                             "hidden: 1024, heads: 8, sequence: 1024, "
                                             "vocab: 1000, flash_attention: true}\n"
                                             "training: {global_batch: 1, micro_batch: 1, "
                                             "precision: bf16}\n"
                                             "strategy: {schedule: dapple, pipeline: 1}\n")});
  };
  // 2,147,483,648 causal FLOPs at 0.25 of 100 TFLOPS: 85.899 us.
  const auto custom = model(
      "{memory: 8 GiB, peak: 100 TFLOPS, hbm_bandwidth: 1000 GB/s, matrix_efficiency: "
      "[{flops: 0 FLOP, efficiency: 0.25}]}");
  EXPECT_EQ(custom.code, 0) << custom.err;
  EXPECT_NE(custom.out.find("85.899 us"), std::string::npos) << custom.out;
  const auto own = model(
      "{memory: 8 GiB, peak: 100 TFLOPS, hbm_bandwidth: 1000 GB/s, matrix_efficiency: "
      "[{flops: 0 FLOP, efficiency: 0.25}], attention_efficiency: "
      "[{flops: 0 FLOP, efficiency: 0.5}]}");
  EXPECT_NE(own.out.find("42.950 us"), std::string::npos) << own.out;
}

// A GPU given by its datasheet figures takes a generation's curves with `like:`: the
// H100's own numbers with like: h100-80gb run exactly as the preset; without it, the flat
// 0.5 (and pipesim model says which).
TEST(Curves, LikeTakesAGenerationsCurves) {
  const auto load = [](const std::string& gpu) {
    return load_scenario_text("cluster: {gpu: " + gpu +
                                  ", nodes: 1, gpus_per_node: 1}\n"
                                  "model: {include: llama3-8b, layers: 2}\n"
                                  "training: {global_batch: 1, micro_batch: 1, precision: fp8}\n"
                                  "strategy: {schedule: dapple, pipeline: 1}\n",
                              "like.yaml");
  };
  const std::string sheet =
      "name: mine, memory: 80 GiB, peak: 989 TFLOPS, peak_fp32: 67 TFLOPS, vector_peak: "
      "133.8 TFLOPS, fp8_peak: 1979 TFLOPS, hbm_bandwidth: 3350 GB/s";
  const Scenario preset = load("h100-80gb");
  const Scenario like = load("{" + sheet + ", like: h100-80gb}");
  const Scenario flat = load("{" + sheet + "}");
  for (size_t i = 0; i < preset.model.layers.size(); ++i) {
    EXPECT_EQ(like.model.layers[i].forward, preset.model.layers[i].forward) << i;
    EXPECT_EQ(like.model.layers[i].backward(), preset.model.layers[i].backward()) << i;
  }
  EXPECT_NE(flat.model.layers[1].forward, preset.model.layers[1].forward);
  const auto model = [](const std::string& gpu) {
    return test::cli({"model", test::write_temp("like.yaml",
                                                "cluster: {gpu: " + gpu +
                                                    ", nodes: 1, gpus_per_node: 1}\n"
                                                    "model: {include: llama3-8b}\n"
                                                    "training: {global_batch: 1, micro_batch: "
                                                    "1, precision: bf16}\n"
                                                    "strategy: {schedule: dapple, pipeline: 1}\n")});
  };
  EXPECT_NE(model("{" + sheet + ", like: h100-80gb}")
                .out.find("mine's efficiency curves are borrowed from the fit to H100 runs"),
            std::string::npos);
  EXPECT_NE(model("{" + sheet + "}").out.find("flat 0.5"), std::string::npos);
  // run warns (stderr and the report's warnings) where the flat share costs the ops.
  const auto run = [](const std::string& gpu) {
    return test::cli({"run", test::write_temp("like-run.yaml",
                                              "cluster: {gpu: " + gpu +
                                                  ", nodes: 1, gpus_per_node: 1}\n"
                                                  "model: {include: llama3-8b, layers: 1, "
                                                  "sequence: 1024}\n"
                                                  "training: {global_batch: 1, micro_batch: "
                                                  "1, precision: bf16}\n"
                                                  "strategy: {schedule: dapple, pipeline: 1}\n")});
  };
  const auto flat_run = run("{" + sheet + "}");
  EXPECT_EQ(flat_run.code, 0) << flat_run.err;
  EXPECT_NE(flat_run.err.find("pipesim: warning: cluster.gpu: 'mine' has no efficiency curves"),
            std::string::npos)
      << flat_run.err;
  EXPECT_EQ(run("{" + sheet + ", like: h100-80gb}").err.find("warning"), std::string::npos);
  const auto both = test::cli(
      {"run", test::write_temp("like-bad.yaml",
                               "cluster: {gpu: {preset: a100-80gb, like: h100-80gb}, nodes: 1, "
                               "gpus_per_node: 1}\nmodel: {include: llama3-8b}\n"
                               "training: {global_batch: 1, micro_batch: 1}\n"
                               "strategy: {schedule: dapple, pipeline: 1}\n")});
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("cluster.gpu.like"), std::string::npos) << both.err;
}

TEST(Fp8, OneLayerByHand) {
  // The round GPU at full efficiency. One GPT layer, h = 1024, 8 heads, ffn 4096,
  // s = 1024, b = 1.
  GpuSpec gpu = round_gpu();
  gpu.efficiency = 1.0;
  Training fp8 = mixed(1);
  fp8.precision = Precision::kFp8;
  const Shape t{1, 1024, 8, 4096, 1024, 1000, false, true};
  const Layer x = transformer_model(t, fp8, gpu).layers[1];
  // QKV, m = 1024 tokens, k = 1024, n = 3072: 2mkn = 6,442,450,944 FLOPs at 200 TFLOPS =
  // 32.212 us; it reads the fp8 input (mk = 1,048,576 B) and weight (kn = 3,145,728 B) and
  // writes the 16-bit output (2mn = 6,291,456 B): 10,485,760 B, 10.5 us at 1 TB/s.
  const OpCost* qkv = op_named(x, "qkv");
  ASSERT_NE(qkv, nullptr);
  EXPECT_DOUBLE_EQ(qkv->bytes, 10'485'760);
  EXPECT_EQ(qkv->forward, Time::ps(32'212'255));  // ceil(6442450944 / 200e12 s)
  EXPECT_FALSE(qkv->forward_memory_bound);
  // Its cast reads the 16-bit input and writes fp8: 3mk = 3,145,728 B, 3.146 us.
  const OpCost* cast = op_named(x, "cast_qkv");
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(cast->forward, Time::ps(3'145'728));
  EXPECT_TRUE(cast->forward_memory_bound);
  // In 16-bit the same GEMM takes 2mkn at 100 TFLOPS = 64.425 us, and has no cast.
  const Layer bf16 = transformer_model(t, mixed(1), gpu).layers[1];
  EXPECT_EQ(op_named(bf16, "qkv")->forward, Time::ps(64'424'510));
  EXPECT_EQ(op_named(bf16, "cast_qkv"), nullptr);
  // The attention core stays in 16-bit: the same time in both.
  EXPECT_EQ(op_named(x, "scores")->forward, op_named(bf16, "scores")->forward);
  // Activations: QKV's, the projection's and fc1's inputs (sbh each) and fc2's (sbf) kept
  // in fp8: 3 x 1,048,576 + 4,194,304 = 7,340,032 bytes fewer.
  EXPECT_EQ(bf16.activation_bytes - x.activation_bytes, 7'340'032);
  // Per parameter with Adam: 2-byte weights and their fp8 copy, 2-byte gradients, fp32
  // master weights and two moments: 3 + 2 + 12.
  const ParamBytes pb = bytes_per_param([&] {
    Training a = fp8;
    a.optimizer = Optimizer::kAdam;
    return a;
  }());
  EXPECT_EQ(pb.weights + pb.gradients + pb.optimizer, 17);
}

TEST(Fp8, NeedsAGpuWithAnFp8Peak) {
  const auto run = [](const std::string& gpu) {
    return test::cli(
        {"run",
         test::write_temp("fp8.yaml", "cluster: {gpu: " + gpu +
                                          ", nodes: 1, gpus_per_node: 1}\n"
                                          "model: {generator: transformer, layers: 1, "
                                          "hidden: 256, heads: 4, sequence: 64, vocab: 100}\n"
                                          "training: {global_batch: 1, micro_batch: 1, "
                                          "precision: fp8}\n"
                                          "strategy: {schedule: dapple, pipeline: 1}\n")});
  };
  const auto a = run("a100-80gb");
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.err.find("training.precision: GPU 'a100-80gb' (node0/gpu0) has no fp8 peak"),
            std::string::npos)
      << a.err;
  EXPECT_EQ(run("h100-80gb").code, 0);
  EXPECT_EQ(run("{preset: a100-80gb, fp8_peak: 624 TFLOPS}").code, 0);
}

}  // namespace
}  // namespace pipesim
