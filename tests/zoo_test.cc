// The model zoo and models described by their shapes: parameter counts and FLOPs against
// published figures, a hand-worked small network, carried tensors, includes, and
// PipeDream's profile graph.
#include "scenario/zoo.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "costs/models.h"
#include "costs/roofline.h"
#include "scenario/scenario.h"
#include "tests/support.h"

namespace pipesim {
namespace {

struct Totals {
  int64_t params = 0;
  double flops = 0;
};

Totals totals(const Model& m) {
  Totals t;
  for (const Layer& l : m.layers) {
    t.params += l.params;
    t.flops += l.forward_flops;
  }
  return t;
}

// A one-GPU scenario around a model section.
std::string scenario_with(const std::string& model, int64_t micro_batch = 1,
                          const std::string& precision = "mixed") {
  return fmt::format(R"(cluster: {{gpu: v100-32gb, nodes: 1, gpus_per_node: 2, intra_node: nvlink}}
model: {}
training: {{global_batch: {}, micro_batch: {}, precision: {}, optimizer: adam}}
strategy: {{schedule: dapple, pipeline: 2}}
)",
                     model, 2 * micro_batch, micro_batch, precision);
}

Model zoo(const std::string& name, int64_t micro_batch = 1) {
  return load_scenario_text(scenario_with(fmt::format("{{include: {}}}", name), micro_batch),
                            "zoo.yaml")
      .model;
}

TEST(Zoo, ConvolutionalNetworksMatchTorchvision) {
  // VGG-19: convolutions sum 9 Cin Cout + Cout over 3-64-64 | 128 128 | 256 x4 | 512 x4 |
  // 512 x4 = 20,024,384; classifier 25088*4096+4096 + 4096*4096+4096 + 4096*1000+1000 =
  // 123,642,856; together 143,667,240, torchvision's vgg19 exactly.
  const Model vgg = zoo("vgg19");
  EXPECT_EQ(totals(vgg).params, 143'667'240);
  EXPECT_EQ(vgg.layers.size(), 16u + 5 + 3);
  // 19.63 G multiply-adds per 224 x 224 image (torchvision's table), 2 FLOPs each; ours
  // adds the pools' compares (about 0.01 %).
  EXPECT_NEAR(totals(vgg).flops, 2 * 19.63e9, 0.005 * 2 * 19.63e9);
  // ResNet-50 v1.5: 25,557,032 parameters (batch norm's scale and shift included), 4.09 G
  // multiply-adds per image.
  const Model resnet = zoo("resnet50");
  EXPECT_EQ(totals(resnet).params, 25'557'032);
  EXPECT_NEAR(totals(resnet).flops, 2 * 4.09e9, 0.01 * 2 * 4.09e9);
  // The micro-batch scales FLOPs, activations and outputs, not parameters.
  const Model resnet8 = zoo("resnet50", 8);
  EXPECT_EQ(totals(resnet8).params, 25'557'032);
  EXPECT_DOUBLE_EQ(totals(resnet8).flops, 8 * totals(resnet).flops);
  EXPECT_EQ(resnet8.layers[3].output_bytes, 8 * resnet.layers[3].output_bytes);
  // res2b's output: 256 x 56 x 56 16-bit elements per image.
  EXPECT_EQ(resnet.layers[3].output_bytes, 256 * 56 * 56 * 2);
}

// AmoebaNet-D (L, D): the stem, two reduction cells, then L/3 normal cells, a reduction,
// L/3 normal cells, a reduction, L/3 normal cells, and the classifier.
std::string amoeba(int L, int D) {
  return fmt::format(
      R"({{input: {{image: [3, 224, 224]}}, layers: [
  {{conv: {{out: {}, kernel: 3, stride: 2, bias: false, batch_norm: true}}}},
  {{amoeba_cell: {{channels: {}, reduction: true}}}},
  {{amoeba_cell: {{channels: {}, reduction: true}}}},
  {{repeat: {}, amoeba_cell: {{channels: {}}}}},
  {{amoeba_cell: {{channels: {}, reduction: true}}}},
  {{repeat: {}, amoeba_cell: {{channels: {}}}}},
  {{amoeba_cell: {{channels: {}, reduction: true}}}},
  {{repeat: {}, amoeba_cell: {{channels: {}}}}},
  {{drop_carried: true, pool: global}},
  {{linear: {{out: 1000}}}}]}})",
      D / 4, D / 2, D, L / 3, D, 2 * D, L / 3, 2 * D, 4 * D, L / 3, 4 * D);
}

TEST(Zoo, AmoebaNetMatchesGPipeAndDapple) {
  // GPipe (Huang et al. 2019), Table 1: AmoebaNet-D (18, 208) 82 M, (18, 416) 318 M,
  // (36, 544) 1.05 B, (72, 512) 1.8 B parameters.
  const std::vector<std::tuple<int, int, double>> cases{
      {18, 208, 82e6}, {18, 416, 318e6}, {36, 544, 1.05e9}, {72, 512, 1.8e9}};
  for (const auto& [L, D, published] : cases) {
    const Model m = load_scenario_text(scenario_with(amoeba(L, D)), "a.yaml").model;
    EXPECT_NEAR(static_cast<double>(totals(m).params), published, 0.025 * published)
        << "AmoebaNet-D (" << L << ", " << D << ")";
    EXPECT_EQ(m.layers.size(), static_cast<size_t>(L + 7));
  }
  // DAPPLE's AmoebaNet-36 (36 normal cells, 512 filters): 933 M parameters.
  EXPECT_NEAR(static_cast<double>(totals(zoo("amoebanet36")).params), 933e6, 0.01 * 933e6);
  // A cell sends its output and its input (the next cell's second input) downstream: the
  // first normal cell of 512 filters at 28 x 28 outputs 4 x 512 channels and carries the
  // 3 x 512-channel output of the reduction before it.
  const Model a = zoo("amoebanet36");
  EXPECT_EQ(a.layers[3].name, "normal1.0");
  EXPECT_EQ(a.layers[3].output_bytes, (4 * 512 + 3 * 512) * 28 * 28 * 2);
  // The classifier's pool drops the carried input: 2048 channels of 1 x 1.
  EXPECT_EQ(a.layers[a.layers.size() - 2].output_bytes, 4 * 4 * 512 * 2);
}

TEST(Zoo, HandWorkedShapeNetwork) {
  // fp32, micro-batch 2, V100 fp32 peak 15.7 TFLOPS at efficiency 0.45.
  //  conv 3x3, 3 -> 4 on 8x8: params 9*3*4 + 4 = 112; FLOPs 2*27*4*64 = 13,824 per image;
  //    keeps its input, 3*64 = 192 elements; outputs 4*8*8 = 256 elements.
  //  max pool 2: keeps 256 elements, outputs 4*4*4 = 64; FLOPs 4 per output = 256.
  //  linear 64 -> 10: params 650; FLOPs 1,280; keeps 64 elements; outputs 10.
  const Model m = load_scenario_text(scenario_with(R"({input: {image: [3, 8, 8]}, layers: [
  {name: c, conv: {out: 4}}, {name: p, pool: {kind: max, kernel: 2}}, {name: fc, linear: {out: 10}}]})",
                                                   2, "fp32"),
                                     "s.yaml")
                      .model;
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.input_bytes, 3 * 64 * 4 * 2);
  EXPECT_EQ(m.layers[0].params, 112);
  EXPECT_DOUBLE_EQ(m.layers[0].forward_flops, 2 * 13'824.0);
  EXPECT_EQ(m.layers[0].activation_bytes, 192 * 4 * 2);
  EXPECT_EQ(m.layers[0].output_bytes, 256 * 4 * 2);
  EXPECT_EQ(m.layers[1].activation_bytes, 256 * 4 * 2);
  EXPECT_EQ(m.layers[1].output_bytes, 64 * 4 * 2);
  EXPECT_DOUBLE_EQ(m.layers[1].forward_flops, 2 * 256.0);
  EXPECT_EQ(m.layers[2].params, 650);
  EXPECT_EQ(m.layers[2].output_bytes, 10 * 4 * 2);
  const GpuSpec& v100 = *find_gpu_preset("v100-32gb");
  // One GEMM [2, 64] x [64, 10] in fp32: 2560 FLOPs, reads 2 x 64 inputs and 64 x 10
  // weights, writes 2 x 10 outputs, 4 bytes each.
  ASSERT_EQ(m.layers[2].ops.size(), 1u);
  EXPECT_EQ(m.layers[2].forward,
            roofline({2560, 4 * (128 + 20)}, true, 4 * 640, 1, v100, Precision::kFp32).time);
  EXPECT_GT(m.layers[2].backward_weight, Time::zero());
  EXPECT_EQ(m.layers[2].source, "analytic");
}

TEST(Zoo, GnmtCarriesTheEncoderOutputAndTheAttentionContext) {
  const Model g = zoo("gnmt16");
  ASSERT_EQ(g.layers.size(), 1u + 8 + 1 + 1 + 1 + 7 + 1);
  // LSTM parameters 4 (in h + h^2 + 2h): the second encoder layer reads the bidirectional
  // layer's 2048 features: 4 (2048*1024 + 1024^2 + 2048) = 12,591,104; so does every
  // decoder layer after the attention (1024 features + 1024 of context).
  EXPECT_EQ(g.layers[2].params, 12'591'104);
  EXPECT_EQ(g.layers[13].params, 12'591'104);
  EXPECT_EQ(g.layers[1].params, 2 * 4 * (1024 * 1024 + 1024 * 1024 + 2048));
  // Token ids in, 8 bytes each.
  EXPECT_EQ(g.input_bytes, 50 * 8);
  // After the attention the decoder sends its state, the encoder output and the context:
  // 3 x 50 x 1024 16-bit elements; before the decoder, only the encoder's output.
  EXPECT_EQ(g.layers[8].output_bytes, 50 * 1024 * 2);
  EXPECT_EQ(g.layers[9].output_bytes, 2 * 50 * 1024 * 2);
  EXPECT_EQ(g.layers[13].output_bytes, 3 * 50 * 1024 * 2);
  // The classifier drops the carried tensors: logits only.
  EXPECT_EQ(g.layers.back().output_bytes, 50 * 32320 * 2);
}

TEST(Zoo, Xlnet36IsTheTransformerGeneratorWithoutPositionTable) {
  // 36 layers of 12 h^2 + 13 h = 12,596,224 parameters at h = 1024, the 32000 x 1024
  // embedding (no position table: XLNet's positions are relative), the final norm's 2 h:
  // 453,464,064 + 32,768,000 + 2,048 = 486,234,112.
  const Model x = zoo("xlnet36");
  ASSERT_EQ(x.layers.size(), 38u);
  EXPECT_EQ(x.layers[1].params, 12'596'224);
  int64_t total = 0;
  for (const Layer& l : x.layers) total += l.params;
  EXPECT_EQ(total, 486'234'112);
}

TEST(Zoo, Bert48IsTheTransformerGenerator) {
  // 48 layers of 12 h^2 + 13 h = 12,596,224 parameters at h = 1024.
  const Model b = zoo("bert48");
  ASSERT_EQ(b.layers.size(), 50u);
  EXPECT_EQ(b.layers[1].params, 12'596'224);
  // The built-in zoo is exactly scenarios/models/*.yaml, each findable by its name.
  std::vector<std::string> files;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(PIPESIM_SOURCE_DIR) + "/scenarios/models"))
    if (e.path().extension() == ".yaml") files.push_back(e.path().stem().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(zoo_model_names(), files);
  for (const std::string& name : files) {
    ASSERT_NE(find_zoo_model(name), nullptr) << name;
    EXPECT_EQ(
        std::string(find_zoo_model(name)),
        test::read_file(std::string(PIPESIM_SOURCE_DIR) + "/scenarios/models/" + name + ".yaml"));
  }
  EXPECT_EQ(find_zoo_model("vgg16"), nullptr);
}

TEST(Zoo, IncludesAndShapeErrorsAreLocated) {
  // A model file included by path, relative to the scenario, with a name override.
  test::write_temp("net.yaml",
                   "name: net\ninput: {image: [3, 8, 8]}\nlayers:\n"
                   "  - {conv: {out: 4}}\n  - {lstm: {hidden: 8}}\n");
  test::write_temp("inc.yaml", scenario_with("{include: net.yaml}"));
  auto r = test::cli({"model", test::temp_path("inc.yaml")});
  EXPECT_EQ(r.code, 2);
  // The error names the included file, the line of the op and what the shape was.
  EXPECT_NE(r.err.find("net.yaml:5:12: model.layers.1.lstm: lstm needs a sequence, but its "
                       "input is an image [4, 8, 8]"),
            std::string::npos)
      << r.err;
  test::write_temp("net.yaml",
                   "input: {image: [3, 8, 8]}\nlayers: [{conv: {out: 4}}, {pool: global}]\n");
  test::write_temp("inc.yaml", scenario_with("{include: net.yaml, name: tiny}"));
  r = test::cli({"model", test::temp_path("inc.yaml")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tiny"), std::string::npos) << r.out;
  // The same file as a YAML profile.
  const Scenario s =
      load_scenario_file(test::write_temp("prof2.yaml", scenario_with("{profile: net.yaml}")));
  EXPECT_EQ(s.model.layers.size(), 2u);
  // Unknown zoo names suggest the closest one and list them all.
  test::write_temp("inc.yaml", scenario_with("{include: vgg91}"));
  r = test::cli({"run", test::temp_path("inc.yaml")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model.include: unknown model 'vgg91'; did you mean 'vgg19'?"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("resnet50"), std::string::npos);
  // Shape layers need an input shape; an op that does not fit is located at the op.
  EXPECT_THROW(load_scenario_text(scenario_with("{layers: [{conv: {out: 4}}]}"), "x.yaml"),
               InputError);
  try {
    load_scenario_text(scenario_with("{input: {tokens: 9}, layers: [{conv: {out: 4}}]}"), "x.yaml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "model.layers.0.conv");
    EXPECT_NE(std::string(e.what()).find("conv needs an image"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      load_scenario_text(
          scenario_with(
              "{input: {image: [3, 4, 4]}, layers: [{conv: {out: 4, kernel: 9, padding: 0}}]}"),
          "x.yaml"),
      InputError);
  EXPECT_THROW(
      load_scenario_text(
          scenario_with("{input: {image: [3, 4, 4]}, layers: [{conv: {out: 4}, pool: global}]}"),
          "x.yaml"),
      InputError);
  // An included file may not include another.
  test::write_temp("net.yaml", "include: vgg19\n");
  test::write_temp("inc.yaml", scenario_with("{include: net.yaml}"));
  r = test::cli({"run", test::temp_path("inc.yaml")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot include another"), std::string::npos) << r.err;
}

TEST(Profile, PipeDreamGraph) {
  // input -> node2 -> {node3, node4} -> node5, outputs 400, 100 (a list), 50 and 10 bytes.
  // Order: node2, node4 (defined first), node3, node5. The cut after node4 carries node2's
  // output (node3 still reads it) and node4's: 400 + 50; after node3, node4's and node3's
  // outputs, 50 + 100; after node5, nothing.
  const std::string graph =
      "node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, "
      "activation_size=1000.0, parameter_size=0.000\n"
      "node2 -- Conv2d(3, 64) -- forward_compute_time=1.500, backward_compute_time=3.000, "
      "activation_size=400.0, parameter_size=4000.000\n"
      "node4 -- ReLU() -- forward_compute_time=0.250, backward_compute_time=0.500, "
      "activation_size=50.0, parameter_size=0.000\n"
      "node3 -- Linear(8, 8) -- forward_compute_time=0.125, backward_compute_time=0.250, "
      "activation_size=[60.0; 40.0], parameter_size=288.000\n"
      "node5 -- Add -- forward_compute_time=0.010, backward_compute_time=0.020, "
      "activation_size=10.0, parameter_size=0.000\n"
      "\tnode1 -- node2\n\tnode2 -- node3\n\tnode2 -- node4\n\tnode3 -- node5\n\tnode4 -- node5\n";
  test::write_temp("graph.txt", graph);
  const Scenario s =
      load_scenario_file(test::write_temp("g.yaml", scenario_with("{profile: graph.txt}")));
  const Model& m = s.model;
  ASSERT_EQ(m.layers.size(), 4u);
  EXPECT_EQ(m.input_bytes, 1000);
  // Ready nodes in file order: node2, then node4 (defined before node3), node3, node5.
  EXPECT_EQ(m.layers[0].name, "node2");
  EXPECT_EQ(m.layers[1].name, "node4");
  EXPECT_EQ(m.layers[2].name, "node3");
  EXPECT_EQ(m.layers[0].forward, Time::us(1500));
  EXPECT_EQ(m.layers[0].backward(), Time::us(3000));
  EXPECT_EQ(m.layers[0].params, 1000);  // 4000 fp32 bytes
  EXPECT_EQ(m.layers[0].output_bytes, 400);
  EXPECT_EQ(m.layers[1].output_bytes, 400 + 50);
  EXPECT_EQ(m.layers[2].activation_bytes, 100);  // a list of outputs is summed
  EXPECT_EQ(m.layers[2].output_bytes, 50 + 100);
  EXPECT_EQ(m.layers[3].output_bytes, 0);  // nothing reads the sink's output
  EXPECT_EQ(m.name, "graph");
  // Malformed lines, unknown nodes and cycles are located errors.
  test::write_temp("graph.txt", "node1 -- X -- forward_compute_time=1, backward_compute_time=2\n");
  auto r = test::cli({"run", test::temp_path("g.yaml")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("graph.txt:1:1: model.profile: a node needs all four fields"),
            std::string::npos)
      << r.err;
  test::write_temp("graph.txt", graph + "\tnode5 -- node9\n");
  r = test::cli({"run", test::temp_path("g.yaml")});
  EXPECT_NE(r.err.find("graph.txt:11:1: model.profile: edge names an unknown node 'node9'"),
            std::string::npos)
      << r.err;
  test::write_temp("graph.txt", graph + "\tnode5 -- node2\n");
  r = test::cli({"run", test::temp_path("g.yaml")});
  EXPECT_NE(r.err.find("cycle"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pipesim
