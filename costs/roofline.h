// Per-operation roofline costs: an op takes the larger of FLOPs / (matrix or vector peak x
// efficiency(FLOPs)) and bytes / (HBM bandwidth x efficiency(bytes)), with the GPU's
// efficiency curves (or its flat cluster.gpu.efficiency).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "schedules/model.h"
#include "topology/presets.h"

namespace pipesim {

// Work of one pass of an op: FLOPs and HBM bytes (reads plus writes).
struct OpWork {
  double flops = 0;
  double bytes = 0;
};

// An op before it is timed, for one micro-batch. `weight_bytes` (the op's weights, read in
// the forward and the input gradient, read and written in the weight gradient) do not
// scale with the batch. `repeats` > 1: the op runs as that many equal sequential pieces
// (an LSTM's time steps), each at the efficiency of its own size.
struct OpSpec {
  std::string name;
  bool matrix = true;
  OpWork forward, backward_input, backward_weight;
  double weight_bytes = 0;
  double repeats = 1;
  // A GEMM on quantized operands: at the fp8 peak under training.precision fp8, the fp4
  // peak under nvfp4.
  bool quantized = false;
  // A fused attention kernel, on the GPU's curve for that kernel.
  std::optional<AttentionKernel> attention;
  // FLOPs times `batch`, batch-dependent bytes times `batch` x `element` (ops built with
  // bytes counted in elements).
  OpSpec& scale(double batch, double element = 1);
  // The op as k sequential shards of its rows (a context rank's tokens, a stage replica's
  // samples), each on the curves at its own size and each reading the weights whole.
  OpSpec& split_rows(double k) {
    repeats *= k;
    weight_bytes *= k;
    return *this;
  }
};

// A GEMM of an [m, k] input by a [k, n] weight: 2mkn FLOPs per pass; the forward reads the
// input and writes the output, B reads the output gradient and writes the input gradient,
// W reads both activations and writes the weight gradient.
OpSpec gemm_op(std::string name, double m, double k, double n, double element_bytes);
// An element-wise (vector-unit) op over `elements`: `flops` per element, the forward moves
// `forward_bytes` per element and the backward `backward_bytes` (input gradient only).
OpSpec elementwise_op(std::string name, double elements, double flops, double forward_bytes,
                      double backward_bytes);

struct Roofline {
  Time time;
  bool memory_bound = false;
};
// One pass of an op on this GPU in this precision (`repeats` pieces of work / repeats).
// `quantized`: a matrix op at the GPU's fp8 peak on its fp8 curve, or under nvfp4 at its
// fp4 peak on its fp4 curve; `attention`: a fused attention kernel, on the GPU's curve for
// that kernel.
Roofline roofline(const OpWork& work, bool matrix, double weight_bytes, double repeats,
                  const GpuSpec& gpu, Precision p, bool quantized = false,
                  std::optional<AttentionKernel> attention = std::nullopt);

// Times every op: a Layer whose forward, backward_input and backward_weight are the sums.
Layer layer_from_ops(std::string name, const std::vector<OpSpec>& ops, double forward_flops,
                     int64_t params, int64_t activation_bytes, int64_t output_bytes,
                     const Training& training, const GpuSpec& gpu);

// `ops` split into k shards of the micro-batch's samples (OpSpec::split_rows) and timed
// (layer_from_ops, times only): the k shards' time.
Layer timed_in_shards(std::vector<OpSpec> ops, int k, const Training& training, const GpuSpec& gpu);

// Layer::sample_retime for a layer timed from `ops` (layer_from_ops): each op split into k
// shards of the micro-batch's samples (OpSpec::split_rows).
std::shared_ptr<const SampleRetime> ops_sample_retime(std::vector<OpSpec> ops,
                                                      const Training& training, const GpuSpec& gpu);

}  // namespace pipesim
