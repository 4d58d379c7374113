#include "scenario/models.h"

#include <fmt/format.h>

#include <cmath>

#include "core/checked.h"
#include "core/error.h"

namespace pipesim {

Time analytic_time(double flops, const GpuSpec& gpu, Precision p) {
  const double peak = p == Precision::kMixed ? gpu.peak_flops : gpu.peak_fp32_flops;
  if (!(peak > 0) || !(gpu.efficiency > 0)) {
    throw InputError(
        fmt::format("GPU '{}' has no {} peak or efficiency to turn FLOPs into time", gpu.name,
                    p == Precision::kMixed ? "16-bit" : "fp32"),
        "a GPU preset, or a mapping with peak (and peak_fp32 for fp32) and efficiency");
  }
  const double ps = std::ceil(flops / (peak * gpu.efficiency) * 1e12);
  if (!(ps < 9.2e18)) too_large(fmt::format("a layer of {:.3g} FLOPs", flops));
  return Time::ps(static_cast<int64_t>(ps));
}

Layer analytic_layer(std::string name, double forward_flops, int64_t params,
                     int64_t activation_bytes, int64_t output_bytes, const Training& training,
                     const GpuSpec& gpu) {
  Layer l;
  l.name = std::move(name);
  l.forward_flops = forward_flops;
  l.forward = analytic_time(forward_flops, gpu, training.precision);
  l.backward_input = l.forward;
  l.backward_weight = l.forward;
  l.split_backward = true;
  l.params = params;
  l.activation_bytes = activation_bytes;
  l.output_bytes = output_bytes;
  l.source = "analytic";
  return l;
}

Model transformer_model(const TransformerShape& t, const Training& training, const GpuSpec& gpu) {
  const double b = static_cast<double>(training.micro_batch);
  const double s = static_cast<double>(t.sequence), h = static_cast<double>(t.hidden);
  const double a = static_cast<double>(t.heads), f = static_cast<double>(t.ffn),
               V = static_cast<double>(t.vocab);
  const int64_t elem = element_bytes(training.precision);
  auto layer = [&](std::string name, double fwd_flops, int64_t params, int64_t activation,
                   int64_t output) {
    return analytic_layer(std::move(name), fwd_flops, params, activation, output, training, gpu);
  };
  // Bytes are products of the shape and the micro-batch: check them in floating point
  // before they become integers (the largest, fp32 logits and the s^2 attention terms).
  for (const double v : {66 * s * b * h + 9 * a * s * s * b, s * b * V * 8, 2 * b * s * h * V}) {
    if (!(v < 4e18)) too_large("the generated model's activations or FLOPs");
  }
  const auto sbh = static_cast<int64_t>(s * b * h);
  const auto as2b = static_cast<int64_t>(a * s * s * b);
  Model m;
  m.name = fmt::format("transformer-{}x{}", t.layers, t.hidden);
  m.input_bytes = static_cast<int64_t>(s * b) * 8;  // token ids (int64)
  m.tokens_per_sample = t.sequence;
  const int64_t embed_params = t.vocab * t.hidden + t.sequence * t.hidden;
  m.layers.push_back(layer("embedding", 2 * s * b * h, embed_params, sbh * elem + sbh, sbh * elem));
  const int64_t layer_params = 4 * t.hidden * t.hidden + 4 * t.hidden + 2 * t.hidden * t.ffn +
                               t.ffn + t.hidden + 4 * t.hidden;
  const double layer_flops =
      2 * b * s * h * 3 * h + 4 * b * s * s * h + 2 * b * s * h * h + 4 * b * s * h * f;
  const int64_t tensors = t.flash_attention ? 32 * sbh : 32 * sbh + 4 * as2b;
  const int64_t masks = t.flash_attention ? 2 * sbh : 2 * sbh + as2b;
  const int64_t activation = tensors * elem / 2 + masks;
  // Selective recompute re-runs QK^T and attention over values (2 x 2bs^2h FLOPs) and does
  // not keep their s^2 tensors: the softmax output and the dropout output in the training
  // precision (2 x as^2b elements) plus the dropout mask (as^2b bytes). Flash attention
  // keeps none of them already.
  const double core_flops = 4 * b * s * s * h;
  const int64_t core_bytes = t.flash_attention ? 0 : 2 * as2b * elem + as2b;
  for (int i = 0; i < t.layers; ++i) {
    m.layers.push_back(
        layer(fmt::format("layer{}", i), layer_flops, layer_params, activation, sbh * elem));
    // Megatron-LM: column-parallel QKV and first MLP GEMM, row-parallel projection and
    // second GEMM: one all-reduce of the b x s x h output after attention and one after the
    // MLP, and the same two on the input gradients in the backward. Without sequence
    // parallelism the layer-norm inputs (2 x 2sbh), the two dropout masks (2sbh) and the
    // attention and MLP inputs' copies (4sbh) stay whole: 10sbh of the 34sbh.
    Layer& x = m.layers.back();
    x.tensor_parallel = true;
    x.tp_forward_allreduces = x.tp_backward_allreduces = 2;
    x.tp_allreduce_bytes = sbh * elem;
    x.tp_replicated_activation = 10 * sbh * elem / 2;
    if (!t.flash_attention) {
      m.layers.back().attention_core_forward = analytic_time(core_flops, gpu, training.precision);
      m.layers.back().attention_core_flops = core_flops;
      m.layers.back().attention_core_bytes = core_bytes;
    }
  }
  // Output head: final layer norm, the projection to the vocabulary, the loss. Logits in
  // the training precision plus their fp32 softmax.
  const auto logits = static_cast<int64_t>(s * b * V);
  m.layers.push_back(layer("head", 2 * b * s * h * V,
                           (t.tie_embeddings ? 0 : t.vocab * t.hidden) + 2 * t.hidden,
                           logits * (elem + 4), 0));
  // Vocabulary-parallel embedding (an all-reduce of its output in the forward) and output
  // layer (an all-reduce of the input gradient in the backward; the cross-entropy's
  // reductions are b x s scalars, left out).
  for (Layer* x : {&m.layers.front(), &m.layers.back()}) {
    x->tensor_parallel = true;
    x->tp_allreduce_bytes = sbh * elem;
  }
  m.layers.front().tp_forward_allreduces = 1;
  m.layers.back().tp_backward_allreduces = 1;
  return m;
}

}  // namespace pipesim
