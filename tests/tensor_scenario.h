// The tensor-parallel test scenario shared by tests/tensor_test.cc and
// tests/tensor_overlap_test.cc.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/model.h"

namespace pipesim::test {

// One node of `t` A100s on NVSwitch; a generated transformer of `layers` layers (h = 256,
// a = 4, s = 128, b = 1, mixed precision): embedding, the layers, the output head.
inline std::string gpt(int t, int layers, const std::string& extra = "", int gpus = 0) {
  return fmt::format(R"(cluster:
  gpu: a100-80gb
  nodes: 1
  gpus_per_node: {}
  intra_node: nvswitch2
model: {{generator: transformer, layers: {}, hidden: 256, heads: 4, sequence: 128, vocab: 1024}}
training: {{global_batch: 1, micro_batch: 1, precision: mixed, optimizer: adam}}
strategy:
  schedule: gpipe
  pipeline: 1
  tensor: {}
{})",
                     gpus > 0 ? gpus : t, layers, t, extra);
}

constexpr int64_t kSbh = 128 * 256;  // s x b x h
constexpr int64_t kAs2b = 4 * 128 * 128;

// The layers as the ranks of a tensor group of degree t cost them (each split GEMM at
// the efficiency of one rank's share).
inline std::vector<Layer> at_degree(const std::vector<Layer>& layers, int t) {
  std::vector<Layer> out;
  for (const Layer& l : layers) out.push_back(l.at_tensor_degree(t));
  return out;
}

}  // namespace pipesim::test
