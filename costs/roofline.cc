#include "costs/roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/checked.h"
#include "core/error.h"

namespace pipesim {

OpSpec& OpSpec::scale(double batch, double element) {
  for (OpWork* w : {&forward, &backward_input, &backward_weight}) {
    w->flops *= batch;
    w->bytes *= batch * element;
  }
  return *this;
}

OpSpec gemm_op(std::string name, double m, double k, double n, double element_bytes) {
  OpSpec op;
  op.name = std::move(name);
  const double flops = 2 * m * k * n;
  op.forward = {flops, element_bytes * (m * k + m * n)};
  op.backward_input = {flops, element_bytes * (m * n + m * k)};
  op.backward_weight = {flops, element_bytes * (m * k + m * n)};
  op.weight_bytes = element_bytes * k * n;
  return op;
}

OpSpec elementwise_op(std::string name, double elements, double flops, double forward_bytes,
                      double backward_bytes) {
  OpSpec op;
  op.name = std::move(name);
  op.matrix = false;
  op.forward = {elements * flops, elements * forward_bytes};
  op.backward_input = {elements * flops, elements * backward_bytes};
  return op;
}

Roofline roofline(const OpWork& work, bool matrix, double weight_bytes, double repeats,
                  const GpuSpec& gpu, Precision p, bool quantized,
                  std::optional<AttentionKernel> attention) {
  if (work.flops <= 0 && work.bytes <= 0) return {};
  const bool mixed = p != Precision::kFp32;
  double peak = mixed ? gpu.peak_flops : gpu.peak_fp32_flops;
  // A GPU given without a vector peak: a quarter of the tensor rate (the A100's ratio).
  if (mixed && !matrix) peak = gpu.vector_flops > 0 ? gpu.vector_flops : gpu.peak_flops / 4;
  // Quantized GEMMs at the fp8 or NVFP4 peak, on that format's curve.
  const bool low = quantized && matrix && p != Precision::kFp32;
  const bool fp4 = low && p == Precision::kNvfp4;
  if (low) peak = fp4 ? gpu.fp4_flops : gpu.fp8_flops;
  if (!(peak > 0)) {
    throw InputError(fmt::format("GPU '{}' has no {} peak to turn FLOPs into time", gpu.name,
                                 fp4     ? "fp4"
                                 : low   ? "fp8"
                                 : mixed ? "16-bit"
                                         : "fp32"),
                     "a GPU preset, or a mapping with peak (and peak_fp32 for fp32)");
  }
  peak *= gpu.clock_share();  // under a power limit: the compute units' clock, not HBM's
  const double n = std::max(repeats, 1.0);
  const double flops = work.flops / n, bytes = (work.bytes + weight_bytes) / n;
  auto eff = [&](const EfficiencyCurve& c, double size) {
    return gpu.efficiency ? *gpu.efficiency : c.at(size);
  };
  const EfficiencyCurve& curve = !matrix              ? gpu.vector_efficiency
                                 : fp4                ? gpu.fp4_efficiency
                                 : low                ? gpu.fp8_efficiency
                                 : attention && mixed ? gpu.attention_curve(*attention)
                                                      : gpu.matrix_efficiency;
  const double compute = flops > 0 ? flops / (peak * eff(curve, flops)) : 0;
  const double memory = gpu.hbm_bytes_per_s > 0 && bytes > 0
                            ? bytes / (gpu.hbm_bytes_per_s * eff(gpu.memory_efficiency, bytes))
                            : 0;
  const double ps = std::ceil(std::max(compute, memory) * n * 1e12);
  if (!(ps < 9.2e18)) too_large(fmt::format("an op of {:.3g} FLOPs", work.flops));
  return {Time::ps(static_cast<int64_t>(ps)), memory > compute};
}

Layer layer_from_ops(std::string name, const std::vector<OpSpec>& ops, double forward_flops,
                     int64_t params, int64_t activation_bytes, int64_t output_bytes,
                     const Training& training, const GpuSpec& gpu) {
  Layer l;
  l.name = std::move(name);
  l.forward_flops = forward_flops;
  l.split_backward = true;
  l.params = params;
  l.activation_bytes = activation_bytes;
  l.output_bytes = output_bytes;
  l.source = "analytic";
  const Precision p = training.precision;
  // What W reads once B is done: each weight-gradient pass's inputs (a GEMM's input and
  // output gradient), which B must leave in memory; B frees the rest (SPEC section 3).
  double weight_reads = 0;
  for (const OpSpec& op : ops) {
    if (op.backward_weight.flops > 0 || op.backward_weight.bytes > 0)
      weight_reads += op.backward_weight.bytes;
  }
  if (!(weight_reads < 4e18)) too_large("a layer's weight-gradient inputs");
  l.weight_activation =
      std::min(static_cast<int64_t>(std::llround(weight_reads)), activation_bytes);
  for (const OpSpec& op : ops) {
    OpCost c;
    c.name = op.name;
    c.matrix = op.matrix;
    c.flops = op.forward.flops;
    c.bytes = op.forward.bytes + op.weight_bytes;
    const bool weights = op.weight_bytes > 0;
    const Roofline f = roofline(op.forward, op.matrix, op.weight_bytes, op.repeats, gpu, p,
                                op.quantized, op.attention);
    const Roofline b = roofline(op.backward_input, op.matrix, weights ? op.weight_bytes : 0,
                                op.repeats, gpu, p, op.quantized, op.attention);
    const Roofline w = roofline(op.backward_weight, op.matrix, weights ? 2 * op.weight_bytes : 0,
                                op.repeats, gpu, p, op.quantized, op.attention);
    c.forward = f.time;
    c.backward_input = b.time;
    c.backward_weight = w.time;
    c.forward_memory_bound = f.memory_bound;
    c.backward_memory_bound = b.memory_bound || w.memory_bound;
    l.forward = checked_add(l.forward, c.forward, "a layer's forward");
    l.backward_input = checked_add(l.backward_input, c.backward_input, "a layer's backward");
    l.backward_weight = checked_add(l.backward_weight, c.backward_weight, "a layer's backward");
    l.ops.push_back(std::move(c));
  }
  return l;
}

Layer timed_in_shards(std::vector<OpSpec> ops, int k, const Training& training,
                      const GpuSpec& gpu) {
  for (OpSpec& op : ops) op.split_rows(k);
  return layer_from_ops("", ops, 0, 0, 0, 0, training, gpu);
}

std::shared_ptr<const SampleRetime> ops_sample_retime(std::vector<OpSpec> ops,
                                                      const Training& training,
                                                      const GpuSpec& gpu) {
  return std::make_shared<const SampleRetime>([ops = std::move(ops), training, gpu](int k) {
    const Layer l = timed_in_shards(ops, k, training, gpu);
    return TensorTimes{l.forward, l.backward_input, l.backward_weight, {}, {}, l.ops};
  });
}

}  // namespace pipesim
