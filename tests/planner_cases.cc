#include "tests/planner_cases.h"

#include <fmt/format.h>

#include "tests/support.h"

namespace pipesim::test {

std::string scenario_yaml(const Case& c, const std::string& strategy) {
  std::string layers;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const auto& [f, b, act, out, params] = c.layers[i];
    layers += fmt::format(
        "    - {{name: l{}, forward: {} ms, backward: {} ms, activation: {} MiB, output: {} MiB, "
        "params: {}}}\n",
        i, f, b, act, out, params);
  }
  return fmt::format(R"(name: {}
cluster:
  gpu: {}
  nodes: {}
  gpus_per_node: {}
  intra_node: nvlink
  inter_node: {{kind: ethernet, bandwidth: {}, latency: 10 us}}
model:
  layers:
{}training:
  global_batch: {}
  micro_batch: {}
  precision: fp32
  optimizer: momentum
strategy:
{})",
                     c.name, c.gpu, c.nodes, c.gpus_per_node, c.inter, layers, c.global_batch,
                     c.micro_batch, strategy);
}

std::string small_transformer_file(const std::string& name) {
  return test::write_temp(
      name + ".yaml",
      "cluster: {gpu: {name: g, memory: 80 GiB, peak: 100 TFLOPS, hbm_bandwidth: 2000 GB/s}, "
      "nodes: 1, gpus_per_node: 4, intra_node: nvlink}\n"
      "model: {generator: transformer, layers: 4, hidden: 512, heads: 8, sequence: 256, "
      "vocab: 1000}\n"
      "training: {global_batch: 8, micro_batch: 2, precision: mixed, optimizer: adam}\n"
      "strategy: {schedule: zb-2p, pipeline: 2}\n");
}

std::string case_file(const Case& c, const std::string& name, const std::string& strategy) {
  return test::write_temp("planner-" + name + ".yaml", scenario_yaml(c, strategy));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  {
    // VGG-like: convolutions with large activations and outputs first, a parameter-heavy
    // classifier last; 25 Gbit/s between two nodes of 2.
    Case c{"vgg-like", 2, 2, "25 Gbit/s", "v100-16gb", 4, 32, {}};
    c.layers = {{4, 8, 400, 200, "40K"}, {6, 12, 400, 100, "200K"}, {6, 12, 300, 50, "1M"},
                {6, 12, 200, 25, "2M"},  {5, 10, 100, 12, "7M"},    {4, 8, 50, 3, "9M"},
                {1, 2, 10, 1, "100M"},   {0.5, 1, 5, 1, "17M"}};
    out.push_back(c);
  }
  {
    // Convolution front, parameter-heavy back, 2 nodes x 3 GPUs.
    Case c{"conv-then-dense", 2, 3, "10 Gbit/s", "v100-16gb", 2, 16, {}};
    c.layers = {{3, 6, 200, 64, "100K"}, {3, 6, 200, 64, "200K"}, {3, 6, 100, 32, "400K"},
                {2, 4, 100, 16, "1M"},   {1, 2, 20, 4, "50M"},    {1, 2, 20, 4, "50M"},
                {0.5, 1, 10, 1, "80M"},  {0.5, 1, 5, 1, "20M"}};
    out.push_back(c);
  }
  {
    // Skewed compute: one layer five times the others, 10 Gbit/s between 2 x 2.
    Case c{"skewed", 2, 2, "10 Gbit/s", "v100-16gb", 2, 16, {}};
    c.layers = {{1, 2, 50, 8, "5M"}, {1, 2, 50, 8, "5M"}, {5, 10, 50, 8, "5M"},
                {1, 2, 50, 8, "5M"}, {1, 2, 50, 8, "5M"}, {1, 2, 50, 8, "5M"},
                {1, 2, 50, 8, "5M"}, {1, 2, 50, 8, "5M"}, {1, 2, 50, 8, "5M"}};
    out.push_back(c);
  }
  {
    // Memory-tight: 1 GiB GPUs; 60 M parameters at 12 bytes (fp32 momentum) are 720 MB
    // whole, so only split plans fit.
    Case c{"memory-tight",
           2,
           2,
           "10 Gbit/s",
           "{name: small, memory: 1 GiB, peak: 125 TFLOPS, hbm_bandwidth: 900 GB/s}",
           2,
           16,
           {}};
    for (int i = 0; i < 8; ++i) c.layers.push_back({1, 2, 40, 4, "7500K"});
    out.push_back(c);
  }
  {
    // A slow link (1 Gbit/s) between 3 nodes of 2 GPUs; large outputs in the middle.
    Case c{"slow-link", 3, 2, "1 Gbit/s", "v100-16gb", 2, 16, {}};
    c.layers = {{2, 4, 50, 2, "2M"}, {2, 4, 50, 40, "2M"}, {2, 4, 50, 40, "2M"},
                {2, 4, 50, 2, "2M"}, {2, 4, 50, 2, "2M"},  {2, 4, 50, 40, "2M"},
                {2, 4, 50, 2, "2M"}, {2, 4, 50, 2, "2M"}};
    out.push_back(c);
  }
  {
    // Four single-GPU nodes on 25 Gbit/s, heterogeneous layers, parameter-light.
    Case c{"four-nodes", 4, 1, "25 Gbit/s", "v100-16gb", 4, 16, {}};
    c.layers = {{2, 4, 100, 20, "1M"}, {3, 6, 100, 20, "1M"}, {1, 2, 100, 20, "1M"},
                {4, 8, 100, 20, "1M"}, {2, 4, 100, 20, "1M"}, {1, 2, 100, 20, "1M"},
                {3, 6, 100, 20, "1M"}, {2, 4, 100, 20, "1M"}, {1, 2, 100, 4, "30M"},
                {1, 2, 10, 1, "10M"}};
    out.push_back(c);
  }
  return out;
}

}  // namespace pipesim::test
