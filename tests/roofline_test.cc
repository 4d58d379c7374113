// Per-op roofline costs, efficiency curves, profiles at another batch, in-place ops and the
// optimizer step of profiles. Expected values are worked by hand in the comments.
#include "costs/roofline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/units.h"
#include "costs/models.h"
#include "scenario/scenario.h"
#include "tests/support.h"

namespace pipesim {
namespace {

Time ps_of(double seconds) {
  return Time::ps(static_cast<int64_t>(std::ceil(seconds * 1e12)));
}

TEST(Roofline, CurvesInterpolateBetweenTheirPoints) {
  // The A100 memory curve, Calculon's (0, 0.3), (1 MB, 0.6), (10 MB, 0.75), (100 MB, 0.9)
  // times 0.6: (0, 0.18), (1 MB, 0.36), (10 MB, 0.45), (100 MB, 0.54).
  const EfficiencyCurve& m = find_gpu_preset("a100-80gb")->memory_efficiency;
  EXPECT_DOUBLE_EQ(m.at(0), 0.18);
  EXPECT_DOUBLE_EQ(m.at(1e6), 0.36);
  EXPECT_DOUBLE_EQ(m.at(1e8), 0.54);
  EXPECT_DOUBLE_EQ(m.at(1e9), 0.54);                   // past the last point: the last
  EXPECT_NEAR(m.at(5.5e6), 0.36 + 0.5 * 0.09, 1e-12);  // half way from 1 MB to 10 MB
  EXPECT_NEAR(m.at(0.5e6), 0.27, 1e-12);               // half way from 0 to 1 MB
  EXPECT_DOUBLE_EQ(EfficiencyCurve::constant(0.4).at(123), 0.4);
  EXPECT_DOUBLE_EQ(m.at(std::nan("")), 0.18);  // never past the table
}

TEST(Roofline, GemmByHand) {
  // [4096, 4096] x [4096, 4096] in 16-bit on an A100: 2 x 4096^3 = 137.4 GFLOP, just past
  // Calculon's last point (128 GFLOP, 0.70) on the way to (8 TFLOP, 0.85): efficiency
  // 0.70 + 0.15 x 9.44e9 / 7.872e12 = 0.70018, 137.4e9 / (312e12 x 0.70018) = 629.1 us. It
  // moves 3 x 4096^2 x 2 = 100.7 MB: 100.7e6 / (2039e9 x 0.54) = 91.4 us, compute bound.
  const double n = 4096;
  const OpSpec g = gemm_op("g", n, n, n, 2);
  EXPECT_DOUBLE_EQ(g.forward.flops, 2 * n * n * n);
  EXPECT_DOUBLE_EQ(g.forward.bytes + g.weight_bytes, 3 * n * n * 2);
  const Roofline r = roofline(g.forward, true, g.weight_bytes, 1, *find_gpu_preset("a100-80gb"),
                              Precision::kMixed);
  EXPECT_FALSE(r.memory_bound);
  const double eff = 0.70 + 0.15 * (2 * n * n * n - 128e9) / (8e12 - 128e9);
  EXPECT_EQ(r.time, ps_of(2 * n * n * n / (312e12 * eff)));
  EXPECT_NEAR(r.time.seconds(), 629.1e-6, 0.1e-6);
}

TEST(Roofline, LayerNormByHand) {
  // 1M elements in 16-bit: reads and writes 2 bytes each, 4 MB; memory curve at 4 MB:
  // 0.36 + 3/9 x 0.09 = 0.39: 4e6 / (2039e9 x 0.39) = 5.030 us. Compute: 8 MFLOP on the
  // vector unit (78 TFLOPS) at 0.1 + 8e6 / 1e9 x 0.4 = 0.1032: 0.994 us. Memory bound.
  const OpSpec ln = elementwise_op("ln", 1e6, 8, 4, 6);
  const Roofline r =
      roofline(ln.forward, false, 0, 1, *find_gpu_preset("a100-80gb"), Precision::kMixed);
  EXPECT_TRUE(r.memory_bound);
  EXPECT_NEAR(r.time.seconds(), 4e6 / (2039e9 * 0.39), 1e-12);
  EXPECT_NEAR(r.time.seconds(), 5.030e-6, 0.001e-6);
}

TEST(Roofline, MemoryBoundOpTakesTwiceAsLongAtHalfTheBandwidth) {
  GpuSpec fast = *find_gpu_preset("a100-80gb");
  fast.hbm_bytes_per_s = 2e12;
  GpuSpec slow = fast;
  slow.hbm_bytes_per_s = 1e12;
  const OpSpec op = elementwise_op("add", 1e8, 1, 6, 6);  // 600 MB, 100 MFLOP
  const Roofline a = roofline(op.forward, false, 0, 1, fast, Precision::kMixed);
  const Roofline b = roofline(op.forward, false, 0, 1, slow, Precision::kMixed);
  ASSERT_TRUE(a.memory_bound && b.memory_bound);
  // Past 100 MB: the curve's last point, 0.9 x 0.6.
  EXPECT_EQ(a.time, ps_of(6e8 / (2e12 * (0.9 * 0.6))));  // 555.6 us
  EXPECT_EQ(b.time, ps_of(6e8 / (1e12 * (0.9 * 0.6))));  // 1111.1 us
  EXPECT_NEAR(b.time.seconds(), 2 * a.time.seconds(), 1e-12);
}

TEST(Roofline, VggPoolOneIsMemoryBoundAndHasNoWeightGradient) {
  // VGG-19 pool1 at micro-batch 32, fp32, V100: reads 64 x 224^2 and writes 64 x 112^2
  // floats per image, 32 x 4 x (3,211,264 + 802,816) = 513,802,240 bytes, past 100 MB:
  // 513.8e6 / (900e9 x 0.54) = 1057.2 us (the FLOP count alone gave 21.8 us).
  const std::string yaml = R"(cluster: {gpu: v100-32gb, nodes: 1, gpus_per_node: 1}
model: {include: vgg19}
training: {global_batch: 32, micro_batch: 32, precision: fp32}
strategy: {schedule: dapple, pipeline: 1}
)";
  const Scenario sc = load_scenario_text(yaml, "vgg.yaml");
  const Layer* pool = nullptr;
  for (const Layer& l : sc.model.layers)
    if (l.name == "pool1") pool = &l;
  ASSERT_NE(pool, nullptr);
  ASSERT_EQ(pool->ops.size(), 1u);
  EXPECT_TRUE(pool->ops[0].forward_memory_bound);
  EXPECT_EQ(pool->forward, ps_of(513'802'240.0 / (900e9 * (0.9 * 0.6))));
  EXPECT_EQ(pool->backward_weight, Time::zero());
  EXPECT_GT(pool->backward_input, Time::zero());
}

TEST(Roofline, FlashAttentionChangesCostAndMemory) {
  // s = 2048, h = 1024, a = 16, b = 1: the unfused core moves the a s^2 b = 64M-element
  // scores through HBM several times (softmax, dropout, both GEMMs); the fused op reads q,
  // k, v and writes the output, 4 sbh elements. Its memory drops the 5 a s^2 b term.
  TransformerShape t{1, 1024, 16, 4096, 2048, 1000, false, true};
  Training tr;
  tr.precision = Precision::kMixed;
  const GpuSpec& gpu = *find_gpu_preset("a100-80gb");
  const Layer plain = transformer_model(t, tr, gpu).layers[1];
  t.flash_attention = true;
  const Layer flash = transformer_model(t, tr, gpu).layers[1];
  EXPECT_EQ(plain.ops.size(), 13u);
  ASSERT_EQ(flash.ops.size(), 10u);
  EXPECT_EQ(flash.ops[2].name, "flash_attention");
  EXPECT_DOUBLE_EQ(flash.ops[2].bytes, 2.0 * 4 * 2048 * 1024);
  EXPECT_LT(flash.forward, plain.forward);
  const int64_t as2b = 16LL * 2048 * 2048;
  EXPECT_EQ(plain.activation_bytes - flash.activation_bytes, 5 * as2b);
}

TEST(Roofline, FlatEfficiencyReplacesTheCurves) {
  GpuSpec g = *find_gpu_preset("a100-80gb");
  g.efficiency = 0.5;
  // 1 GFLOP GEMM with tiny traffic: 1e9 / (312e12 x 0.5) = 6.41 us.
  const Roofline r = roofline({1e9, 1000}, true, 0, 1, g, Precision::kMixed);
  EXPECT_EQ(r.time, ps_of(1e9 / 156e12));
}

std::string profile_scenario(const std::string& profile, const std::string& extra) {
  return "cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 1}\nmodel: {profile: " + profile +
         extra +
         "}\ntraining: {global_batch: 16, micro_batch: 16, precision: mixed, "
         "optimizer: adam}\nstrategy: {schedule: dapple, pipeline: 1}\n";
}

TEST(ProfileBatch, LinearScalingByHand) {
  // Measured at batch 8, trained at 16: every time and size doubles.
  const std::string csv = test::write_temp(
      "p8.csv", "name,forward,backward,activation,output,params\na,1 ms,2 ms,10 MB,4 MB,1M\n");
  const Scenario sc = load_scenario_text(profile_scenario(csv, ", batch: 8"), "p.yaml");
  const Layer& l = sc.model.layers[0];
  EXPECT_EQ(l.forward, Time::ms(2));
  EXPECT_EQ(l.backward(), Time::ms(4));
  EXPECT_EQ(l.activation_bytes, 20'000'000);
  EXPECT_EQ(l.output_bytes, 8'000'000);
  EXPECT_EQ(l.source, "profile/linear");
  // Without batch, the profile is taken as given.
  const Scenario same = load_scenario_text(profile_scenario(csv, ""), "p.yaml");
  EXPECT_EQ(same.model.layers[0].forward, Time::ms(1));
  EXPECT_EQ(same.model.layers[0].source, "profile");
}

TEST(ProfileBatch, CurveScalingAndInPlaceOps) {
  // A Linear(in_features=1024, out_features=1024) node measured at batch 1 with a 4 KiB
  // fp32 output (1024 outputs): 2 x 1024 x 1024 = 2.1 MFLOP. At batch 16 its roofline
  // grows from r1 to r16 (16-bit: 4 KiB / 2 of input and output per sample, 2 MiB of
  // weights): the time scales by r16 / r1, far less than 16 (the weights dominate).
  const std::string graph = test::write_temp(
      "g.txt",
      "node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, "
      "activation_size=4096.0, parameter_size=0.000\n"
      "node2 -- Linear(in_features=1024, out_features=1024, bias=True) -- "
      "forward_compute_time=1.000, backward_compute_time=2.000, activation_size=4096.0, "
      "parameter_size=4198400.000\n"
      "node3 -- ReLU(inplace=True) -- forward_compute_time=0.100, backward_compute_time=0.100, "
      "activation_size=4096.0, parameter_size=0.000\n"
      "\tnode1 -- node2\n\tnode2 -- node3\n");
  const Scenario sc = load_scenario_text(profile_scenario(graph, ", batch: 1"), "p.yaml");
  ASSERT_EQ(sc.model.layers.size(), 2u);
  const Layer& lin = sc.model.layers[0];
  EXPECT_EQ(lin.source, "profile/curve");
  const GpuSpec& gpu = *find_gpu_preset("a100-80gb");
  const double flops = 2.0 * 1024 * 1024, bytes = 2 * 4096.0 / 4 * 2, weights = 1'049'600.0 * 2;
  const double ratio =
      static_cast<double>(
          roofline({flops * 16, bytes * 16}, true, weights, 1, gpu, Precision::kMixed)
              .time.ps_count()) /
      static_cast<double>(
          roofline({flops, bytes}, true, weights, 1, gpu, Precision::kMixed).time.ps_count());
  EXPECT_LT(ratio, 16);
  EXPECT_EQ(lin.forward, Time::ps(static_cast<int64_t>(std::round(1e9 * ratio))));
  EXPECT_EQ(lin.activation_bytes, 16 * 4096);
  // ReLU(inplace=True) overwrites the Linear's output: it keeps nothing of its own.
  const Layer& relu = sc.model.layers[1];
  EXPECT_EQ(relu.source, "profile/linear");
  EXPECT_EQ(relu.activation_bytes, 0);
  EXPECT_EQ(relu.forward, Time::us(1600));
  // On 4 stage replicas (Layer::sample_retime) the Linear runs 4 GEMMs of 4 samples, each
  // reading the weights: its time at 16 samples times roofline(4 x 1/4) / roofline(1). The
  // ReLU's FLOPs are not known: it splits linearly.
  const auto at16 = [&](double k) {
    return static_cast<double>(
        roofline({flops * 16, bytes * 16}, true, weights * k, k, gpu, Precision::kMixed)
            .time.ps_count());
  };
  ASSERT_TRUE(lin.sample_retime);
  const double g = at16(4) / at16(1);
  EXPECT_GT(g, 1.5);  // 4 x 4 samples: the weights read four times over
  EXPECT_EQ(
      (*lin.sample_retime)(4).forward,
      Time::ps(static_cast<int64_t>(std::round(static_cast<double>(lin.forward.ps_count()) * g))));
  EXPECT_FALSE(relu.sample_retime);
  // A graph measured at the training's micro-batch (no batch: taken as given) splits the
  // same way.
  const Scenario given = load_scenario_text(profile_scenario(graph, ""), "p.yaml");
  EXPECT_TRUE(given.model.layers[0].sample_retime);
}

TEST(OptimizerStep, ProfilesGetTheMemoryBoundUpdate) {
  // 1M parameters, mixed precision Adam: optimizer_bytes_per_param bytes each over the A100's
  // 2039 GB/s; hand-written layers keep SPEC's zero unless they give optimizer: <time>.
  const std::string csv =
      test::write_temp("o.csv", "name,forward,backward,params\na,1 ms,2 ms,1M\n");
  const Scenario sc = load_scenario_text(profile_scenario(csv, ""), "p.yaml");
  const int64_t bytes = 1'000'000 * 28;  // gradient 2, master 4 + 4, moments 16, weights 2
  EXPECT_EQ(sc.model.layers[0].optimizer, serialization_time(bytes, 2039e9));
  EXPECT_GT(sc.model.layers[0].optimizer, Time::zero());
  const std::string given =
      test::write_temp("o2.csv", "name,forward,backward,params,optimizer\na,1 ms,2 ms,1M,5 us\n");
  EXPECT_EQ(load_scenario_text(profile_scenario(given, ""), "p.yaml").model.layers[0].optimizer,
            Time::us(5));
  const std::string written = R"(cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 1}
model: {layers: [{forward: 1 ms, backward: 2 ms, params: 1M}]}
training: {global_batch: 1, micro_batch: 1, precision: mixed, optimizer: adam}
strategy: {schedule: dapple, pipeline: 1}
)";
  EXPECT_EQ(load_scenario_text(written, "w.yaml").model.layers[0].optimizer, Time::zero());
}

TEST(GpuCurves, ScenarioKeysAndErrors) {
  auto yaml = [](const std::string& gpu) {
    return "cluster: {gpu: " + gpu +
           ", nodes: 1, gpus_per_node: 1}\nmodel: {include: vgg19}\ntraining: {global_batch: "
           "1, micro_batch: 1}\nstrategy: {schedule: dapple, pipeline: 1}\n";
  };
  const Scenario sc = load_scenario_text(
      yaml("{preset: v100-32gb, matrix_efficiency: [{flops: 1 GFLOP, efficiency: 0.5}, {flops: "
           "2 GFLOP, efficiency: 0.7}], memory_efficiency: [{bytes: 1 MB, efficiency: 0.8}]}"),
      "c.yaml");
  const GpuSpec& g = sc.cluster.device(0).gpu;
  EXPECT_DOUBLE_EQ(g.matrix_efficiency.at(1.5e9), 0.6);
  EXPECT_DOUBLE_EQ(g.memory_efficiency.at(5e6), 0.8);
  for (const auto& [gpu, message] : std::vector<std::pair<std::string, std::string>>{
           {"{preset: v100-32gb, matrix_efficiency: [{flops: 2 GFLOP, efficiency: 0.5}, {flops: "
            "1 GFLOP, efficiency: 0.7}]}",
            "cluster.gpu.matrix_efficiency.1.flops: sizes must increase"},
           {"{preset: v100-32gb, matrix_efficiency: [{flops: 2 GFLOPS, efficiency: 0.5}]}",
            "is not an amount of FLOPs"},
           {"{preset: v100-32gb, vector_efficiency: [{flops: 2 GFLOP, efficiency: 1.5}]}",
            "vector_efficiency.0.efficiency"},
           {"{preset: v100-32gb, memory_efficiency: [{bytes: 1 MB, eff: 0.5}]}",
            "memory_efficiency.0"}}) {
    const std::string path = test::write_temp("bad.yaml", yaml(gpu));
    const test::CliResult r = test::cli({"model", path});
    EXPECT_EQ(r.code, 2) << gpu;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

TEST(TensorParallel, ProfileAndUnsplittableShapeLayersRefuseASplit) {
  // Generated transformer layers and shape-described linear, conv, pool, attention and lstm
  // layers have a tensor-parallel layout; a profile (measured) layer or a bottleneck under
  // tensor: 2 is bad input naming the layer and its source.
  const std::string csv = test::write_temp("tp.csv", "name,forward,backward\na,1 ms,2 ms\n");
  for (const auto& [model, source] : std::vector<std::pair<std::string, std::string>>{
           {"{profile: " + csv + "}", "profile"},
           {"{input: {image: [16, 8, 8]}, layers: [{bottleneck: {mid: 4, out: 16}}]}",
            "analytic"}}) {
    const std::string path = test::write_temp(
        "tp.yaml", "cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 2}\nmodel: " + model +
                       "\ntraining: {global_batch: 2, micro_batch: 2}\nstrategy: {schedule: "
                       "dapple, pipeline: 1, tensor: 2}\n");
    const test::CliResult r = test::cli({"run", path});
    EXPECT_EQ(r.code, 2) << model;
    EXPECT_NE(r.err.find("strategy.tensor: layer 0"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("(" + source + " costs)"), std::string::npos) << r.err;
  }
  // VGG-19 (convs, pools, linears) splits.
  const std::string vgg = test::write_temp(
      "tp.yaml",
      "cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 2}\nmodel: {include: vgg19}\n"
      "training: {global_batch: 2, micro_batch: 2}\nstrategy: {schedule: dapple, pipeline: 1, "
      "tensor: 2}\n");
  const test::CliResult ok = test::cli({"run", vgg});
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST(ModelCommand, OpsBreakdownWithBounds) {
  const std::string path =
      test::write_temp("ops.yaml", R"(cluster: {gpu: a100-80gb, nodes: 1, gpus_per_node: 1}
model: {generator: transformer, layers: 1, hidden: 1024, heads: 16, sequence: 1024, vocab: 1000}
training: {global_batch: 1, micro_batch: 1, precision: mixed}
strategy: {schedule: dapple, pipeline: 1}
)");
  test::CliResult r = test::cli({"model", path, "--ops"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("softmax"), std::string::npos);
  EXPECT_NE(r.out.find("memory"), std::string::npos);
  EXPECT_NE(r.out.find("compute"), std::string::npos);
  r = test::cli({"model", path, "--ops", "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& ops = j["layers"][1]["ops"];
  ASSERT_EQ(ops.size(), 13u);
  EXPECT_EQ(ops[9]["name"], "fc1");
  EXPECT_EQ(ops[9]["forward_bound"], "compute");
  EXPECT_EQ(ops[3]["name"], "softmax");
  EXPECT_EQ(ops[3]["forward_bound"], "memory");
  // Without --ops the JSON has no breakdown.
  r = test::cli({"model", path, "--json", "-"});
  EXPECT_FALSE(nlohmann::json::parse(r.out)["layers"][1].contains("ops"));
}

}  // namespace
}  // namespace pipesim
