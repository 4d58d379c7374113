// The pipeline x data job of the scaling and trace benchmarks: S stages of one layer each
// (1 ms forward, 2 ms backward) over D data-parallel copies of M micro-batches, one DAPPLE
// iteration with a ring gradient all-reduce between each stage's copies, on H100 nodes of 8
// with `nics` InfiniBand NDR ports each.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace pipesim {

inline std::string pipeline_data_yaml(int64_t S, int64_t M, int64_t D, int64_t nics) {
  return fmt::format(R"(cluster:
  gpu: h100-80gb
  nodes: {nodes}
  gpus_per_node: 8
  intra_node: nvswitch
  inter_node: {{preset: ib-ndr, nics: {nics}}}
model:
  layers: [{{name: block, repeat: {S}, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 4 MiB, params: 1M}}]
training: {{global_batch: {B}, micro_batch: 1}}
strategy: {{schedule: dapple, pipeline: {S}, data: {D}, allreduce: ring}}
)",
                     fmt::arg("nodes", std::max<int64_t>(S * D / 8, 1)), fmt::arg("S", S),
                     fmt::arg("D", D), fmt::arg("B", M * D), fmt::arg("nics", nics));
}

}  // namespace pipesim
