#include "scenario/models.h"

#include <fmt/format.h>

#include <cmath>

#include "core/checked.h"
#include "core/error.h"
#include "scenario/roofline.h"

namespace pipesim {

namespace {

// Features of the keys and the values together: 2h, or 2 r h with r = query_groups / heads
// (grouped-query attention).
int64_t kv_features(const TransformerShape& t) {
  return t.query_groups > 0 ? 2 * t.query_groups * (t.hidden / t.heads) : 2 * t.hidden;
}

// A layer norm or RMSNorm over `elements`: reads x, writes y; its backward reads x and dy,
// writes dx. RMSNorm skips the mean and the bias: about half the FLOPs.
OpSpec norm_op(const char* name, const TransformerShape& t, double elements, double e) {
  const double flops = t.norm == TransformerShape::Norm::kRmsNorm ? 4 : 8;
  return elementwise_op(name, elements, flops, 2 * e, 3 * e);
}

// Parameters of one norm: a scale, and a bias for LayerNorm.
int64_t norm_params(const TransformerShape& t) {
  return t.norm == TransformerShape::Norm::kRmsNorm ? t.hidden : 2 * t.hidden;
}

// A weight GEMM of the layer, [m, k] by [k, n]. Under fp8 (Transformer Engine's recipe)
// it runs at the fp8 peak on fp8 operands: the forward reads the fp8 input and weight and
// writes a 16-bit output, B reads the fp8 output gradient and writes a 16-bit input
// gradient, W reads the fp8 input and output gradient; before it, a cast (with its amax)
// turns the input into fp8 in the forward and the output gradient in the backward, reading
// 16 bits and writing 8 per element.
void weight_gemm(std::vector<OpSpec>& ops, const char* name, double m, double k, double n, double e,
                 bool fp8) {
  if (!fp8) {
    ops.push_back(gemm_op(name, m, k, n, e));
    return;
  }
  OpSpec cast;
  cast.name = std::string("cast_") + name;
  cast.matrix = false;
  cast.forward = {2 * m * k, (e + 1) * m * k};
  cast.backward_input = {2 * m * n, (e + 1) * m * n};
  ops.push_back(cast);
  OpSpec g = gemm_op(name, m, k, n, 1);
  g.forward.bytes = m * k + e * m * n;
  g.backward_input.bytes = m * n + e * m * k;
  g.fp8 = true;
  ops.push_back(g);
}

// The ops of one transformer layer (see models.h) for b sequences of s tokens.
std::vector<OpSpec> layer_ops(const TransformerShape& t, double b, double e, bool fp8) {
  const double s = static_cast<double>(t.sequence), h = static_cast<double>(t.hidden);
  const double a = static_cast<double>(t.heads), f = static_cast<double>(t.ffn);
  const double bs = b * s, sbh = s * b * h, as2b = a * s * s * b;
  const double r = static_cast<double>(kv_features(t)) / (2 * h);  // keys' width / queries'
  std::vector<OpSpec> ops;
  ops.push_back(norm_op("ln1", t, sbh, e));
  weight_gemm(ops, "qkv", bs, h, (1 + 2 * r) * h, e, fp8);
  if (t.position == TransformerShape::Position::kRotary) {
    // Rotary embeddings on the queries and keys (1 + r) sbh elements: x cos + rot(x) sin,
    // reading and writing each once; the backward is the same rotation (it keeps nothing:
    // cos and sin are not the layer's activations).
    ops.push_back(elementwise_op("rotary", (1 + r) * sbh, 3, 2 * e, 2 * e));
  }
  if (t.flash_attention) {
    // Fused attention (Dao et al. 2022): reads q, k, v and writes the output; its backward
    // re-computes the scores and runs five GEMMs of bs^2h/a each per head (2.5x the forward),
    // reading q, k, v, the output and its gradient and writing dq, dk, dv. Causal (the
    // default): the kernel skips the blocks above the diagonal, half of the s^2 work. On the GPU's
    // attention curve (docs/presets.md): the kernels reach a different share of the peak
    // than plain GEMMs, and that share differs between generations.
    OpSpec att;
    att.name = "flash_attention";
    att.attention = true;
    const double mask = t.causal ? 0.5 : 1.0;  // the share of the s^2 blocks it runs
    att.forward = {mask * 4 * b * s * s * h, e * (2 + 2 * r) * sbh};
    att.backward_input = {mask * 10 * b * s * s * h, e * (4 + 4 * r) * sbh};
    ops.push_back(att);
  } else {
    OpSpec scores;
    scores.name = "scores";
    scores.forward = {2 * b * s * s * h, e * ((1 + r) * sbh + as2b)};
    scores.backward_input = {4 * b * s * s * h, e * (as2b + 2 * (1 + r) * sbh)};
    ops.push_back(scores);
    ops.push_back(elementwise_op("softmax", as2b, 5, 2 * e, 3 * e));
    ops.push_back(elementwise_op("attention_dropout", as2b, 1, 2 * e + 1, 2 * e + 1));
    OpSpec values;
    values.name = "values";
    values.forward = {2 * b * s * s * h, e * (as2b + (1 + r) * sbh)};
    values.backward_input = {4 * b * s * s * h, e * (2 * as2b + (1 + 2 * r) * sbh)};
    ops.push_back(values);
  }
  weight_gemm(ops, "projection", bs, h, h, e, fp8);
  // Bias, dropout and residual add fused: reads x and the residual, writes y and the mask.
  ops.push_back(elementwise_op("dropout_add1", sbh, 2, 3 * e + 1, 2 * e + 1));
  ops.push_back(norm_op("ln2", t, sbh, e));
  if (t.gated()) {
    // Gate and value in one GEMM (2f wide), then act(gate) x value: reads both, writes the
    // product; the backward reads both and the product's gradient, writes two gradients.
    weight_gemm(ops, "fc1", bs, h, 2 * f, e, fp8);
    const double act = t.mlp == TransformerShape::Mlp::kSwiglu ? 6 : 9;  // SiLU or GeLU, x
    ops.push_back(elementwise_op(t.mlp == TransformerShape::Mlp::kSwiglu ? "swiglu" : "geglu",
                                 bs * f, act, 3 * e, 5 * e));
  } else {
    weight_gemm(ops, "fc1", bs, h, f, e, fp8);
    ops.push_back(elementwise_op("gelu", bs * f, 8, 2 * e, 3 * e));
  }
  weight_gemm(ops, "fc2", bs, f, h, e, fp8);
  ops.push_back(elementwise_op("dropout_add2", sbh, 2, 3 * e + 1, 2 * e + 1));
  return ops;
}

// The ops outside Megatron's tensor-parallel region of a transformer layer: without
// sequence parallelism every rank of the group runs them whole.
bool outside_tensor_region(const std::string& op) {
  return op == "ln1" || op == "dropout_add1" || op == "ln2" || op == "dropout_add2";
}

bool attention_core(const std::string& op) {
  return op == "scores" || op == "softmax" || op == "attention_dropout" || op == "values";
}

// Sets the layer's tp_whole_* times: the sums over its ops `whole` picks.
template <typename Pred>
void set_whole_ops(Layer& x, Pred whole) {
  for (const OpCost& op : x.ops) {
    if (!whole(op.name)) continue;
    x.tp_whole_forward += op.forward;
    x.tp_whole_backward_input += op.backward_input;
    x.tp_whole_backward_weight += op.backward_weight;
  }
}

// The weight-gradient time of the op called `name` (a column-parallel GEMM).
Time weight_gradient_of(const Layer& x, const char* name) {
  for (const OpCost& op : x.ops)
    if (op.name == name) return op.backward_weight;
  PIPESIM_ASSERT(false, "the generated layers hold their column-parallel GEMMs");
  return Time::zero();
}

}  // namespace

Model transformer_model(const TransformerShape& t, const Training& training, const GpuSpec& gpu) {
  const double b = static_cast<double>(training.micro_batch);
  const double s = static_cast<double>(t.sequence), h = static_cast<double>(t.hidden);
  const double a = static_cast<double>(t.heads), f = static_cast<double>(t.ffn),
               V = static_cast<double>(t.vocab);
  const int64_t elem = element_bytes(training.precision);
  const double e = static_cast<double>(elem);
  auto layer = [&](std::string name, const std::vector<OpSpec>& ops, double fwd_flops,
                   int64_t params, int64_t activation, int64_t output) {
    return layer_from_ops(std::move(name), ops, fwd_flops, params, activation, output, training,
                          gpu);
  };
  // Bytes are products of the shape and the micro-batch: check them in floating point
  // before they become integers (the largest, fp32 logits and the s^2 attention terms).
  for (const double v :
       {66 * s * b * h + 12 * s * b * f + 9 * a * s * s * b, s * b * V * 8, 2 * b * s * h * V}) {
    if (!(v < 4e18)) too_large("the generated model's activations or FLOPs");
  }
  const auto sbh = static_cast<int64_t>(s * b * h);
  const auto as2b = static_cast<int64_t>(a * s * s * b);
  Model m;
  m.name = fmt::format("transformer-{}x{}", t.layers, t.hidden);
  m.input_bytes = static_cast<int64_t>(s * b) * 8;  // token ids (int64)
  m.tokens_per_sample = t.sequence;
  const bool learned = t.position == TransformerShape::Position::kLearned;
  const int64_t positions = learned ? t.sequence * t.hidden : 0;
  const int64_t embed_params = t.vocab * t.hidden + positions;
  // Word and position lookups, their sum and the dropout: reads two rows per token, writes
  // the sum and the mask; the backward scatters the output gradient into both tables (W).
  // It keeps the dropout mask; its output is the next layer's input, kept there.
  OpSpec lookup = elementwise_op("lookup", s * b * h, 2, 3 * e + 1, 0);
  lookup.backward_weight = {0, 3 * e * s * b * h};
  m.layers.push_back(layer("embedding", {lookup}, 2 * s * b * h, embed_params, sbh, sbh * elem));
  m.layers.back().tp_replicated_activation = sbh;
  m.layers.back().tp_replicated_weight_activation = sbh;
  m.layers.back().tp_replicated_params = positions;
  const bool fp8 = training.precision == Precision::kFp8;
  const std::vector<OpSpec> ops = layer_ops(t, b, e, fp8);
  const int64_t kv = kv_features(t);
  // MLP: two h x f matrices (GeLU) or three (gated, the first two as one 2f-wide GEMM),
  // with their biases.
  const int64_t mlp_params = t.gated() ? 3 * t.hidden * t.ffn + 2 * t.ffn + t.hidden
                                       : 2 * t.hidden * t.ffn + t.ffn + t.hidden;
  const int64_t layer_params = (t.hidden + kv) * t.hidden + t.hidden + kv + t.hidden * t.hidden +
                               t.hidden + mlp_params + 2 * norm_params(t);
  const double kvd = static_cast<double>(kv);
  const double layer_flops = 2 * b * s * h * (h + kvd) + 4 * b * s * s * h + 2 * b * s * h * h +
                             (t.gated() ? 6 : 4) * b * s * h * f;
  // Korthikanti's 32 sbh holds 2 sbh each of keys and values; grouped, they are 2 r sbh.
  // Its MLP keeps the GeLU's input and output, 2f elements per token (16 sbh at f = 4h);
  // a gated MLP keeps the gate and value (2f) and their product (f): 3f. The other 12 sbh:
  // the two norms' inputs, the QKV and fc1 inputs, the queries, the projection's input.
  const auto kv_tensors = static_cast<int64_t>(s * b * kvd);
  // Under fp8 the four weight GEMMs keep their inputs' fp8 copies: QKV's, the projection's
  // and fc1's sbh and fc2's sbf elements at 1 byte instead of 2.
  const auto mlp_tensors = static_cast<int64_t>((t.gated() ? 6 : 4) * s * b * f) -
                           (fp8 ? static_cast<int64_t>(s * b * f) : 0);
  const int64_t tensors = (t.flash_attention ? 12 * sbh : 12 * sbh + 4 * as2b) -
                          (fp8 ? 3 * sbh : 0) + mlp_tensors + 2 * kv_tensors;
  const int64_t masks = t.flash_attention ? 2 * sbh : 2 * sbh + as2b;
  const int64_t activation = tensors * elem / 2 + masks;
  // Selective recompute re-runs QK^T and attention over values (2 x 2bs^2h FLOPs) and does
  // not keep their s^2 tensors: the softmax output and the dropout output in the training
  // precision (2 x as^2b elements) plus the dropout mask (as^2b bytes). Flash attention
  // keeps none of them already.
  const double core_flops = 4 * b * s * s * h;
  const int64_t core_bytes = t.flash_attention ? 0 : 2 * as2b * elem + as2b;
  // Every layer is the same: cost it once.
  Layer x = layer("layer", ops, layer_flops, layer_params, activation, sbh * elem);
  {
    // Megatron-LM: column-parallel QKV and first MLP GEMM, row-parallel projection and
    // second GEMM: one all-reduce of the b x s x h output after attention and one after the
    // MLP, and the same two on the input gradients in the backward. Without sequence
    // parallelism the layer-norm inputs (2 x 2sbh), the two dropout masks (2sbh) and the
    // attention and MLP inputs' copies (4sbh) stay whole: 10sbh of the 34sbh.
    x.tensor_parallel = true;
    x.tp_forward_allreduces = x.tp_backward_allreduces = 2;
    x.tp_allreduce_bytes = sbh * elem;
    // The backward reaches the first MLP GEMM's input gradient, then QKV's: each
    // all-reduce can run beside that GEMM's weight gradient (Strategy::tensor_overlap).
    x.tp_backward_beside = {weight_gradient_of(x, "fc1"), weight_gradient_of(x, "qkv")};
    set_whole_ops(x, outside_tensor_region);
    // At degree t every other op runs as t equal shards, one per rank, each at the
    // efficiency of its own size (OpSpec::repeats prices exactly that).
    x.tensor_retime = std::make_shared<const TensorRetime>(
        [ops, layer_flops, layer_params, activation, sbh, elem, training, gpu](int degree) {
          std::vector<OpSpec> split = ops;
          for (OpSpec& op : split) {
            if (!outside_tensor_region(op.name)) op.repeats *= degree;
          }
          const Layer l = layer_from_ops("layer", split, layer_flops, layer_params, activation,
                                         sbh * elem, training, gpu);
          return TensorTimes{l.forward, l.backward_input, l.backward_weight,
                             {weight_gradient_of(l, "fc1"), weight_gradient_of(l, "qkv")}};
        });
    x.tp_replicated_activation = (fp8 ? 8 : 10) * sbh * elem / 2;  // fp8 inputs: 1 byte
    // W reads the column-parallel GEMMs' inputs (QKV's and the first MLP GEMM's) whole on
    // every rank: 2sbh of its 16sbh elements (in fp8 under fp8).
    x.tp_replicated_weight_activation = 2 * sbh * (fp8 ? 1 : elem);
    x.tp_replicated_params = 2 * norm_params(t) + 2 * t.hidden;  // norms, two output biases
    if (!t.flash_attention) {
      for (const OpCost& op : x.ops) {
        if (attention_core(op.name))
          x.attention_core_forward = checked_add(x.attention_core_forward, op.forward, "a time");
      }
      x.attention_core_flops = core_flops;
      x.attention_core_bytes = core_bytes;
    }
  }
  for (int i = 0; i < t.layers; ++i) {
    m.layers.push_back(x);
    m.layers.back().name = fmt::format("layer{}", i);
  }
  // Output head: final layer norm, the projection to the vocabulary, the loss. It keeps
  // the layer norm's input and output (the projection's input), the logits in the training
  // precision and their fp32 softmax.
  const auto logits = static_cast<int64_t>(s * b * V);
  const std::vector<OpSpec> head_ops{
      norm_op("ln_f", t, s * b * h, e), gemm_op("logits", s * b, h, V, e),
      // fp32 softmax and loss: reads the logits, writes the fp32 probabilities; the backward
      // reads them and writes the logits' gradient.
      elementwise_op("cross_entropy", s * b * V, 5, e + 4, 4 + e)};
  m.layers.push_back(layer("head", head_ops, 2 * b * s * h * V,
                           (t.tie_embeddings ? 0 : t.vocab * t.hidden) + norm_params(t),
                           logits * (elem + 4) + 2 * sbh * elem, 0));
  m.layers.back().tp_replicated_activation = 2 * sbh * elem;
  m.layers.back().tp_replicated_weight_activation = sbh * elem;  // the projection's input
  m.layers.back().tp_replicated_params = norm_params(t);
  if (t.tie_embeddings) {
    // The projection is the word embedding's table: a stage without the embedding keeps a
    // copy (Megatron-LM's last pipeline stage).
    m.layers.back().tied_to = 0;
    m.layers.back().tied_params = t.vocab * t.hidden;
  }
  // Vocabulary-parallel embedding (an all-reduce of its output in the forward) and output
  // layer (an all-reduce of the input gradient in the backward; the cross-entropy's
  // reductions are b x s scalars, left out).
  for (Layer* x : {&m.layers.front(), &m.layers.back()}) {
    x->tensor_parallel = true;
    x->tp_allreduce_bytes = sbh * elem;
  }
  m.layers.front().tp_forward_allreduces = 1;
  m.layers.front().recomputed = m.layers.back().recomputed = false;
  m.layers.back().tp_backward_allreduces = 1;
  m.layers.back().tp_backward_beside = {weight_gradient_of(m.layers.back(), "logits")};
  set_whole_ops(m.layers.back(), [](const std::string& op) { return op == "ln_f"; });
  return m;
}

}  // namespace pipesim
