// NVFP4 training (training.precision: nvfp4, Transformer Engine's NVFP4BlockScaling): the
// weight GEMMs at the fp4 peak on 4-bit operands with an fp8 scale per 16 elements, their
// casts, the inputs they keep, the weights' copies, and the GPUs that can run it. Worked by
// hand on a round GPU at full efficiency.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "costs/models.h"
#include "scenario/scenario.h"
#include "tests/support.h"

namespace pipesim {
namespace {

using test::mixed;

Training nvfp4(int64_t micro_batch) {
  Training t = mixed(micro_batch);
  t.precision = Precision::kNvfp4;
  return t;
}

Time forward_of(const Layer& l, const std::string& name) {
  for (const OpCost& op : l.ops)
    if (op.name == name) return op.forward;
  ADD_FAILURE() << "no op " << name;
  return Time::zero();
}

TEST(Nvfp4, OneLayerByHand) {
  // 100 TFLOPS 16-bit, 200 fp8, 400 NVFP4, 50 vector, 1 TB/s, every op at full efficiency.
  // One GPT layer, h = 1024, 8 heads, ffn 4096, s = 1024, b = 1.
  GpuSpec gpu = test::round_gpu();
  gpu.efficiency = 1.0;
  const TransformerShape t{1, 1024, 8, 4096, 1024, 1000, false, true};
  const Layer x = transformer_model(t, nvfp4(1), gpu).layers[1];
  const Layer bf16 = transformer_model(t, mixed(1), gpu).layers[1];
  // QKV, m = 1024 tokens, k = 1024, n = 3072: 2mkn = 6,442,450,944 FLOPs at 400 TFLOPS,
  // 16.106 us. It reads the NVFP4 input and weight at 0.5625 bytes an element (half a byte
  // and an fp8 scale per 16: 589,824 + 1,769,472 B) and writes the 16-bit output
  // (6,291,456 B): 8,650,752 B, 8.65 us at 1 TB/s, under the compute.
  const OpCost* qkv = nullptr;
  for (const OpCost& op : x.ops)
    if (op.name == "qkv") qkv = &op;
  ASSERT_NE(qkv, nullptr);
  EXPECT_DOUBLE_EQ(qkv->bytes, 8'650'752);
  EXPECT_EQ(qkv->forward, Time::ps(16'106'128));  // ceil(6442450944 / 400e12 s)
  EXPECT_FALSE(qkv->forward_memory_bound);
  // Its cast reads the 16-bit input twice (the amax for the tensor's scale, then the cast)
  // and writes two copies (row-wise for this GEMM, column-wise for the weight gradient's):
  // (2 x 2 + 2 x 0.5625) mk = 5,373,952 B, 5.374 us.
  EXPECT_EQ(forward_of(x, "cast_qkv"), Time::ps(5'373'952));
  // The attention core stays in 16 bits; the same GEMM in 16 bits takes 64.425 us.
  EXPECT_EQ(forward_of(x, "scores"), forward_of(bf16, "scores"));
  EXPECT_EQ(forward_of(bf16, "qkv"), Time::ps(64'424'510));
  // Activations: QKV's, the projection's and fc1's inputs (sbh each) and fc2's (sbf) kept
  // as their NVFP4 copies, 1.4375 bytes an element fewer than 16 bits:
  // 1.4375 x (3 x 1,048,576 + 4,194,304) = 10,551,296 bytes.
  EXPECT_EQ(bf16.activation_bytes - x.activation_bytes, 10'551'296);
  // Per parameter with Adam: 2-byte weights and their NVFP4 copies (row- and column-wise,
  // 1.125 bytes, counted as 1), 2-byte gradients, fp32 master weights and two moments:
  // 3 + 2 + 12; with the NVFP4 copies alone (fp8_params, Megatron's --fp4-param-gather),
  // 1 + 2 + 12, and ZeRO gathers that byte.
  Training adam = nvfp4(1);
  adam.optimizer = Optimizer::kAdam;
  const ParamBytes pb = bytes_per_param(adam);
  EXPECT_EQ(pb.weights + pb.gradients + pb.optimizer, 17);
  adam.fp8_params = true;
  const ParamBytes low = bytes_per_param(adam);
  EXPECT_EQ(low.weights + low.gradients + low.optimizer, 15);
  EXPECT_EQ(low.gathered, 1);
}

TEST(Nvfp4, NeedsAGpuWithAnFp4Peak) {
  const auto run = [](const std::string& gpu, const std::string& training) {
    return test::cli(
        {"run",
         test::write_temp("nvfp4.yaml", "cluster: {gpu: " + gpu +
                                            ", nodes: 1, gpus_per_node: 1}\n"
                                            "model: {generator: transformer, layers: 1, "
                                            "hidden: 256, heads: 4, sequence: 64, vocab: 100}\n"
                                            "training: {global_batch: 1, micro_batch: 1, " +
                                            training +
                                            "}\n"
                                            "strategy: {schedule: dapple, pipeline: 1}\n")});
  };
  const auto h = run("h100-80gb", "precision: nvfp4");
  EXPECT_EQ(h.code, 2);
  EXPECT_NE(h.err.find("training.precision: GPU 'h100-80gb' (node0/gpu0) has no fp4 peak"),
            std::string::npos)
      << h.err;
  for (const char* g : {"b200", "gb200", "b300", "gb300"})
    EXPECT_EQ(run(g, "precision: nvfp4").code, 0) << g;
  EXPECT_EQ(run("{preset: h100-80gb, fp4_peak: 4000 TFLOPS}", "precision: nvfp4").code, 0);
  // The weights' NVFP4 copies alone: with nvfp4 or fp8, not with 16 bits.
  EXPECT_EQ(run("gb300", "precision: nvfp4, fp8_params: true").code, 0);
  const auto bf16 = run("gb300", "precision: bf16, fp8_params: true");
  EXPECT_EQ(bf16.code, 2);
  EXPECT_NE(bf16.err.find("training.fp8_params"), std::string::npos) << bf16.err;
}

// NVFP4 GEMMs follow the fp8 GEMMs' curve wherever the scenario gives one and not their
// own, and two node groups whose GPUs differ in a curve alone are two kinds of GPU.
TEST(Nvfp4, FollowsTheFp8CurveAndMixedGroupsTellCurvesApart) {
  const auto tokens = [](const std::string& cluster) {
    const test::CliResult r =
        test::cli({"run", "--json", "-",
                   test::write_temp(
                       "nvfp4-curve.yaml",
                       "cluster: " + cluster +
                           "\nmodel: {include: llama3-8b, layers: 2, sequence: 1024, vocab: 1024}\n"
                           "training: {global_batch: 2, micro_batch: 1, precision: nvfp4}\n"
                           "strategy: {schedule: dapple, pipeline: 2}\n")});
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("tokens_per_s").get<double>();
  };
  const std::string slow = "[{flops: 0 GFLOP, efficiency: 0.05}]";
  const double plain = tokens("{gpu: gb300, nodes: 1, gpus_per_node: 2}");
  EXPECT_LT(
      tokens("{gpu: {preset: gb300, fp8_efficiency: " + slow + "}, nodes: 1, gpus_per_node: 2}"),
      0.8 * plain);
  // A custom GPU's matrix and fp8 curves: NVFP4 on the fp8 one, as fp8 would run.
  const std::string sheet =
      "name: mine, memory: 80 GiB, peak: 1000 TFLOPS, fp8_peak: 2000 TFLOPS, "
      "fp4_peak: 4000 TFLOPS, hbm_bandwidth: 4 TB/s, "
      "matrix_efficiency: [{flops: 0 GFLOP, efficiency: 0.6}], "
      "vector_efficiency: [{flops: 0 GFLOP, efficiency: 0.6}], "
      "memory_efficiency: [{bytes: 0 MB, efficiency: 0.6}]";
  const std::string half = "[{flops: 0 GFLOP, efficiency: 0.3}]";
  EXPECT_GT(tokens("{gpu: {" + sheet + "}, nodes: 1, gpus_per_node: 2}"),
            1.3 * tokens("{gpu: {" + sheet + ", fp8_efficiency: " + half +
                         "}, nodes: 1, gpus_per_node: 2}"));
  // Two groups, one GPU each, the second's NVFP4 curve slowed: its stage sets the pace.
  const auto groups = [&](const std::string& second) {
    return tokens(
        "{node_groups: [{nodes: 1, gpus_per_node: 1, gpu: gb300}, {nodes: 1, "
        "gpus_per_node: 1, gpu: " +
        second + "}], inter_node: {preset: ib-xdr, nics: 1}}");
  };
  EXPECT_LT(groups("{preset: gb300, fp4_efficiency: " + slow + "}"), 0.8 * groups("gb300"));
}

// The preset peaks (docs/presets.md): HGX B200's 72 PFLOPS of dense FP4 over 8 GPUs, GB200
// NVL72's 720 over 72; Blackwell Ultra: HGX B300's 105 over 8, GB300 NVL72's 1,080 over 72.
// Hopper has none. Until NVFP4 runs are fitted, its GEMMs take the fp8 level.
TEST(Nvfp4, PresetPeaks) {
  EXPECT_DOUBLE_EQ(find_gpu_preset("b200")->fp4_flops, 72e15 / 8);
  EXPECT_DOUBLE_EQ(find_gpu_preset("gb200")->fp4_flops, 720e15 / 72);
  EXPECT_DOUBLE_EQ(find_gpu_preset("b300")->fp4_flops, 105e15 / 8);
  EXPECT_DOUBLE_EQ(find_gpu_preset("gb300")->fp4_flops, 1080e15 / 72);
  EXPECT_EQ(find_gpu_preset("h100-80gb")->fp4_flops, 0);
  const GpuSpec& g = *find_gpu_preset("gb300");
  EXPECT_DOUBLE_EQ(g.fp4_efficiency.at(1e12), g.fp8_efficiency.at(1e12));
}

}  // namespace
}  // namespace pipesim
