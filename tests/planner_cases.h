// Small heterogeneous cases for the planner's tests (profiled layers on a few nodes of
// V100s, slow links between them) and the scenario files they make.
#pragma once

#include <string>
#include <tuple>
#include <vector>

namespace pipesim::test {

struct Case {
  std::string name;
  int nodes = 2, gpus_per_node = 2;
  std::string inter = "10 Gbit/s";
  std::string gpu = "v100-16gb";
  int micro_batch = 2, global_batch = 16;
  // forward ms, backward ms, activation MiB, output MiB, params
  std::vector<std::tuple<double, double, int, int, std::string>> layers;
};

// The case as a scenario with `strategy` (indented YAML lines) as its strategy section.
std::string scenario_yaml(const Case& c, const std::string& strategy);

// The case as a scenario file; the planner replaces its strategy, so any valid one does.
std::string case_file(const Case& c, const std::string& name,
                      const std::string& strategy = "  schedule: dapple\n  pipeline: 1\n");

// A 4-layer generated transformer on 4 GPUs (splittable, attention cores, split backward):
// its space has tensor degrees 2 and 4, recompute, zero bubble and interleaving.
std::string small_transformer_file(const std::string& name);

// Six cases: VGG-like, convolutions then dense layers, skewed compute, memory-tight, a slow
// link, four single-GPU nodes.
std::vector<Case> cases();

}  // namespace pipesim::test
