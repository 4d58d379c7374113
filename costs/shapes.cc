#include "costs/shapes.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <span>

#include "core/checked.h"
#include "core/error.h"
#include "costs/internal/shape_cost.h"
#include "costs/models.h"
#include "costs/roofline.h"

namespace pipesim {
namespace {

using internal::scaled_ops;
using internal::ShapeCost;
using internal::to_whole;
using Kind = TensorShape::Kind;

// Ops are built per sample with byte counts in elements (element size 1); the layer
// scales them by the micro-batch and the element size. Weights do not scale with the batch.
OpSpec pool_op(double in, double out, double flops) {
  OpSpec op;
  op.name = "pool";
  op.matrix = false;
  op.forward = {flops, in + out};
  op.backward_input = {flops, out + in};  // reads the output gradient, writes the input's
  return op;
}

// Batch norm in training: statistics then normalisation (reads the input twice, writes
// the output); its backward reads the input and the output gradient twice, writes one.
OpSpec batch_norm_op(double elements) { return elementwise_op("batch_norm", elements, 8, 3, 4); }

TensorShape image(int64_t c, int64_t h, int64_t w) {
  TensorShape t;
  t.kind = Kind::kImage;
  t.channels = c;
  t.height = h;
  t.width = w;
  return t;
}

TensorShape sequence(int64_t tokens, int64_t features) {
  TensorShape t;
  t.kind = Kind::kSequence;
  t.tokens = tokens;
  t.features = features;
  return t;
}

[[noreturn]] void mismatch(std::string_view op, std::string_view needs, const TensorShape& got) {
  throw InputError(fmt::format("{} needs {}, but its input is {}", op, needs, got.describe()),
                   "a layer that fits the shape coming out of the previous one");
}

void need_image(std::string_view op, const TensorShape& t) {
  if (t.kind != Kind::kImage) mismatch(op, "an image [channels, height, width]", t);
}

// Output size of a sliding window; an error when the window does not fit.
int64_t window_out(std::string_view op, int64_t in, int64_t kernel, int64_t stride,
                   int64_t padding) {
  const int64_t span = in + 2 * padding - kernel;
  if (span < 0 || stride <= 0) {
    throw InputError(fmt::format("{}: a {} window does not fit an input of {} with padding {}", op,
                                 kernel, in, padding),
                     "a kernel no larger than the padded input");
  }
  return span / stride + 1;
}

// A convolution (kh x kw, stride sh x sw) on an image, with optional bias and batch norm.
ShapeCost conv_cost(TensorShape& t, int64_t out, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                    int64_t ph, int64_t pw, bool bias, bool bn) {
  const int64_t ho = window_out("conv", t.height, kh, sh, ph);
  const int64_t wo = window_out("conv", t.width, kw, sw, pw);
  const double cin = static_cast<double>(t.channels), cout = static_cast<double>(out);
  const double outputs = cout * static_cast<double>(ho) * static_cast<double>(wo);
  ShapeCost c;
  c.flops = 2 * static_cast<double>(kh * kw) * cin * outputs;
  c.params = static_cast<double>(kh * kw) * cin * cout + (bias ? cout : 0) + (bn ? 2 * cout : 0);
  c.activation_elements = t.elements() + (bn ? outputs : 0);
  // Implicit GEMM: reads the input once, writes the output; B and W likewise.
  OpSpec conv;
  conv.name = fmt::format("conv{}x{}", kh, kw);
  conv.forward = {c.flops, t.elements() + outputs};
  conv.backward_input = conv.backward_weight = conv.forward;
  conv.weight_bytes = static_cast<double>(kh * kw) * cin * cout;
  c.ops.push_back(conv);
  if (bn) c.ops.push_back(batch_norm_op(outputs));
  t = image(out, ho, wo);
  return c;
}

ShapeCost square_conv(TensorShape& t, int64_t out, int64_t k, int64_t stride, bool bn,
                      bool bias = false) {
  return conv_cost(t, out, k, k, stride, stride, k / 2, k / 2, bias, bn);
}

// ---- AmoebaNet-D (the genotype of GPipe's and torchgpipe's AmoebaNet-D) ----
enum class CellOp {
  kNone,
  kConv1x1,
  kConv3x3,
  kConv1x7x7x1,
  kAvgPool3x3,
  kMaxPool3x3,
  kMaxPool2x2
};
struct CellStep {
  int input;
  CellOp op;
};
// Each pair of steps adds two ops' results into a new state; states 0 and 1 are the cell's
// two inputs after their 1x1 reductions.
constexpr std::array<CellStep, 10> kNormalCell = {{{1, CellOp::kConv1x1},
                                                   {1, CellOp::kMaxPool3x3},
                                                   {1, CellOp::kNone},
                                                   {0, CellOp::kConv1x7x7x1},
                                                   {0, CellOp::kConv1x1},
                                                   {0, CellOp::kConv1x7x7x1},
                                                   {2, CellOp::kMaxPool3x3},
                                                   {2, CellOp::kNone},
                                                   {1, CellOp::kAvgPool3x3},
                                                   {5, CellOp::kConv1x1}}};
constexpr std::array<int, 4> kNormalConcat = {0, 3, 4, 6};
constexpr std::array<CellStep, 10> kReductionCell = {{{0, CellOp::kMaxPool2x2},
                                                      {0, CellOp::kMaxPool3x3},
                                                      {2, CellOp::kNone},
                                                      {1, CellOp::kConv3x3},
                                                      {2, CellOp::kConv1x7x7x1},
                                                      {2, CellOp::kMaxPool3x3},
                                                      {3, CellOp::kNone},
                                                      {1, CellOp::kMaxPool2x2},
                                                      {2, CellOp::kAvgPool3x3},
                                                      {3, CellOp::kConv1x1}}};
constexpr std::array<int, 3> kReductionConcat = {4, 5, 6};

// Two strided 1x1 convolutions, each to half the channels, concatenated, then batch norm.
ShapeCost factorized_reduce(TensorShape& t, int64_t out) {
  TensorShape half = t;
  ShapeCost c = conv_cost(half, out / 2, 1, 1, 2, 2, 0, 0, false, false);
  c.flops *= 2;
  c.params = 2 * c.params + 2 * static_cast<double>(out);
  for (OpSpec& op : c.ops) {
    op.scale(2);
    op.weight_bytes *= 2;
  }
  t = image(out, half.height, half.width);
  c.activation_elements += t.elements();  // batch norm's input
  c.ops.push_back(batch_norm_op(t.elements()));
  return c;
}

// One cell op on c channels; every op keeps the size at stride 1 and halves it at stride 2.
ShapeCost cell_op(CellOp op, TensorShape& t, int64_t stride) {
  const int64_t c = t.channels, q = t.channels / 4;
  ShapeCost cost;
  switch (op) {
    case CellOp::kNone:
      if (stride == 1) return cost;
      return factorized_reduce(t, c);
    case CellOp::kConv1x1:
      return square_conv(t, c, 1, stride, true);
    case CellOp::kConv3x3:
      cost += square_conv(t, q, 1, 1, true);
      cost += square_conv(t, q, 3, stride, true);
      cost += square_conv(t, c, 1, 1, true);
      return cost;
    case CellOp::kConv1x7x7x1:
      cost += square_conv(t, q, 1, 1, true);
      cost += conv_cost(t, q, 1, 7, 1, stride, 0, 3, false, true);
      cost += conv_cost(t, q, 7, 1, stride, 1, 3, 0, false, true);
      cost += square_conv(t, c, 1, 1, true);
      return cost;
    case CellOp::kAvgPool3x3:
    case CellOp::kMaxPool3x3:
    case CellOp::kMaxPool2x2: {
      const int64_t k = op == CellOp::kMaxPool2x2 ? 2 : 3;
      cost.activation_elements = t.elements();
      const double in = t.elements();
      t = image(c, (t.height + stride - 1) / stride, (t.width + stride - 1) / stride);
      cost.flops = static_cast<double>(k * k) * t.elements();
      cost.ops.push_back(pool_op(in, t.elements(), cost.flops));
      return cost;
    }
  }
  return cost;
}

ShapeCost amoeba_cell(const AmoebaCellOp& op, ShapeState& s) {
  need_image("an AmoebaNet cell", s.current);
  const TensorShape input = s.current;
  const TensorShape skip = s.carried.empty() ? input : s.carried.back();
  if (skip.kind != Kind::kImage) mismatch("an AmoebaNet cell's second input", "an image", skip);
  const int64_t c = op.channels;
  if (c % 4 != 0) {
    throw InputError(fmt::format("an AmoebaNet cell needs channels divisible by 4, got {}", c),
                     "a multiple of 4");
  }
  ShapeCost cost;
  std::vector<TensorShape> states(2, input);
  cost += square_conv(states[0], c, 1, 1, true);  // ReLU-conv-BN of the previous cell's output
  states[1] = skip;
  if (skip.height != input.height || skip.width != input.width) {
    if (skip.height != 2 * input.height && skip.height != 2 * input.height - 1) {
      throw InputError(
          fmt::format("an AmoebaNet cell's inputs are {} and {}: neither the same size nor "
                      "one reduction apart",
                      input.describe(), skip.describe()),
          "consecutive cells");
    }
    cost += factorized_reduce(states[1], c);  // the input before a reduction
  } else if (skip.channels != c) {
    cost += square_conv(states[1], c, 1, 1, true);
  }
  const std::span<const CellStep> steps = op.reduction ? std::span<const CellStep>(kReductionCell)
                                                       : std::span<const CellStep>(kNormalCell);
  for (size_t i = 0; i < steps.size(); i += 2) {
    TensorShape a = states[static_cast<size_t>(steps[i].input)];
    TensorShape b = states[static_cast<size_t>(steps[i + 1].input)];
    cost += cell_op(steps[i].op, a, op.reduction && steps[i].input < 2 ? 2 : 1);
    cost += cell_op(steps[i + 1].op, b, op.reduction && steps[i + 1].input < 2 ? 2 : 1);
    PIPESIM_ASSERT(a.height == b.height && a.channels == b.channels, "cell ops agree on shape");
    states.push_back(a);
  }
  const std::span<const int> concat =
      op.reduction ? std::span<const int>(kReductionConcat) : std::span<const int>(kNormalConcat);
  const TensorShape& last = states[static_cast<size_t>(concat.back())];
  s.current = image(c * static_cast<int64_t>(concat.size()), last.height, last.width);
  if (s.carried.empty()) {
    s.carried.push_back(input);
  } else {
    s.carried.back() = input;
  }
  return cost;
}

struct Apply {
  ShapeState& s;

  ShapeCost operator()(const ConvOp& op) const {
    need_image("conv", s.current);
    const int64_t pad = op.padding < 0 ? op.kernel / 2 : op.padding;
    return conv_cost(s.current, op.out, op.kernel, op.kernel, op.stride, op.stride, pad, pad,
                     op.bias, op.batch_norm);
  }

  ShapeCost operator()(const PoolOp& op) const {
    need_image("pool", s.current);
    ShapeCost c;
    const double in = s.current.elements();
    c.activation_elements = in;
    if (op.global) {
      c.flops = in;
      s.current = image(s.current.channels, 1, 1);
    } else {
      const int64_t stride = op.stride > 0 ? op.stride : op.kernel;
      const int64_t ho = window_out("pool", s.current.height, op.kernel, stride, op.padding);
      const int64_t wo = window_out("pool", s.current.width, op.kernel, stride, op.padding);
      s.current = image(s.current.channels, ho, wo);
      c.flops = static_cast<double>(op.kernel * op.kernel) * s.current.elements();
    }
    c.ops.push_back(pool_op(in, s.current.elements(), c.flops));
    return c;
  }

  ShapeCost operator()(const LinearOp& op) const {
    TensorShape& t = s.current;
    if (t.kind == Kind::kTokens) mismatch("linear", "features, not token ids", t);
    const bool seq = t.kind == Kind::kSequence;
    const double tokens = seq ? static_cast<double>(t.tokens) : 1;
    const double in = seq ? static_cast<double>(t.features) : t.elements();
    const double out = static_cast<double>(op.out);
    ShapeCost c;
    c.flops = 2 * tokens * in * out;
    c.params = in * out + (op.bias ? out : 0);
    c.activation_elements = tokens * in;
    c.ops.push_back(gemm_op("linear", tokens, in, out, 1));
    if (seq) {
      t.features = op.out;
    } else {
      t = TensorShape{};
      t.features = op.out;
    }
    return c;
  }

  ShapeCost operator()(const BottleneckOp& op) const {
    need_image("bottleneck", s.current);
    const TensorShape input = s.current;
    TensorShape& t = s.current;
    ShapeCost c = square_conv(t, op.mid, 1, 1, true);
    c += square_conv(t, op.mid, 3, op.stride, true);
    c += square_conv(t, op.out, 1, 1, true);
    if (op.stride != 1 || input.channels != op.out) {
      TensorShape shortcut = input;
      ShapeCost p = square_conv(shortcut, op.out, 1, op.stride, true);
      p.activation_elements -= input.elements();  // the block's input is already kept
      c += p;
    }
    return c;
  }

  ShapeCost operator()(const AmoebaCellOp& op) const { return amoeba_cell(op, s); }

  ShapeCost operator()(const EmbeddingOp& op) const {
    TensorShape ids = s.current;
    if (op.tokens > 0) {
      if (s.current.kind != Kind::kTokens) s.carried.push_back(s.current);
      ids = TensorShape{};
      ids.kind = Kind::kTokens;
      ids.tokens = op.tokens;
    } else if (ids.kind != Kind::kTokens) {
      mismatch("embedding", "token ids (or 'tokens: N' to read new ones)", ids);
    }
    ShapeCost c;
    c.params = static_cast<double>(op.vocab) * static_cast<double>(op.dim);
    c.flops = static_cast<double>(ids.tokens) * static_cast<double>(op.dim);  // one per element
    c.activation_id_bytes = static_cast<double>(ids.tokens) * 8;
    // Gathers one row per token and writes it; the backward scatters the gradient (W).
    OpSpec lookup = elementwise_op("lookup", c.flops, 1, 2, 0);
    lookup.backward_weight = {0, 2 * c.flops};
    c.ops.push_back(lookup);
    s.current = sequence(ids.tokens, op.dim);
    return c;
  }

  ShapeCost operator()(const LstmOp& op) const {
    if (s.current.kind != Kind::kSequence) mismatch("lstm", "a sequence", s.current);
    double in = static_cast<double>(s.current.features);
    if (op.context) {
      if (s.carried.empty() || s.carried.back().kind != Kind::kSequence)
        mismatch("lstm with context", "an attention context carried along", s.current);
      in += static_cast<double>(s.carried.back().features);
    }
    const double h = static_cast<double>(op.hidden), T = static_cast<double>(s.current.tokens);
    const double dirs = op.bidirectional ? 2 : 1;
    ShapeCost c;
    c.params = dirs * 4 * (in * h + h * h + 2 * h);  // two bias vectors, as cuDNN and PyTorch
    c.flops = dirs * T * 2 * 4 * (in * h + h * h);
    c.activation_elements = dirs * T * (in + 7 * h);
    c.ops = internal::lstm_ops(dirs, T, in, h, h);
    s.current.features = (op.bidirectional ? 2 : 1) * op.hidden;
    return c;
  }

  ShapeCost operator()(const AttentionOp& op) const {
    if (s.current.kind != Kind::kSequence) mismatch("attention", "a sequence", s.current);
    if (s.carried.empty() || s.carried.back().kind != Kind::kSequence)
      mismatch("attention", "a carried sequence to attend to (an encoder output)", s.current);
    const TensorShape keys = s.carried.back();
    const double T = static_cast<double>(s.current.tokens),
                 q = static_cast<double>(s.current.features);
    const double Ts = static_cast<double>(keys.tokens), k = static_cast<double>(keys.features);
    const double a = op.hidden > 0 ? static_cast<double>(op.hidden) : k;
    ShapeCost c;
    // Query and key projections, v . tanh(q + k), softmax-weighted sum of the keys.
    c.params = q * a + k * a + 2 * a + 1;
    c.flops = 2 * T * q * a + 2 * Ts * k * a + 3 * T * Ts * a + 2 * T * Ts * k;
    c.activation_elements = T * q + Ts * k + T * Ts * a + T * Ts;
    OpSpec context;
    context.name = "context";
    context.forward = {2 * T * Ts * k, T * Ts + Ts * k + T * k};
    context.backward_input = {4 * T * Ts * k, 2 * (T * Ts + Ts * k + T * k)};
    // v . tanh(q + k): writes the tanh tensor, reads it back in the backward.
    c.ops.insert(c.ops.end(), {gemm_op("query", T, q, a, 1), gemm_op("key", Ts, k, a, 1),
                               elementwise_op("scores", T * Ts * a, 3, 1, 2),
                               elementwise_op("softmax", T * Ts, 5, 2, 3), context});
    s.carried.push_back(sequence(s.current.tokens, keys.features));
    return c;
  }
};

}  // namespace

double TensorShape::elements() const {
  switch (kind) {
    case Kind::kImage:
      return static_cast<double>(channels) * static_cast<double>(height) *
             static_cast<double>(width);
    case Kind::kSequence:
      return static_cast<double>(tokens) * static_cast<double>(features);
    case Kind::kTokens:
      return static_cast<double>(tokens);
    case Kind::kVector:
      return static_cast<double>(features);
  }
  return 0;
}

std::string TensorShape::describe() const {
  switch (kind) {
    case Kind::kImage:
      return fmt::format("an image [{}, {}, {}]", channels, height, width);
    case Kind::kSequence:
      return fmt::format("a sequence of {} x {}", tokens, features);
    case Kind::kTokens:
      return fmt::format("{} token ids", tokens);
    case Kind::kVector:
      return fmt::format("a vector of {}", features);
  }
  return {};
}

namespace {

// Bytes of a tensor: token ids are 8 bytes, everything else precision-sized.
double tensor_bytes(const TensorShape& t, double elem) {
  return t.elements() * (t.kind == Kind::kTokens ? 8 : elem);
}

}  // namespace

namespace internal {

int64_t to_whole(double v, std::string_view what) {
  if (!(v < 4e18)) too_large(what);
  return static_cast<int64_t>(std::llround(v));
}

// The ops of a cost, built per sample in elements, for one micro-batch of b samples.
std::vector<OpSpec> scaled_ops(const ShapeCost& c, double b, double elem) {
  std::vector<OpSpec> ops = c.ops;
  for (OpSpec& op : ops) {
    op.scale(b, elem);
    op.weight_bytes *= elem;
  }
  return ops;
}

std::vector<OpSpec> lstm_ops(double dirs, double T, double in, double h, double units) {
  // One GEMM of every step's input at once; the recurrent GEMM and the gates run step by
  // step (T sequential pieces, each at the efficiency of its own size).
  OpSpec input = gemm_op("lstm_input", dirs * T, in, 4 * units, 1);
  input.weight_bytes *= dirs;
  OpSpec recurrent = gemm_op("lstm_recurrent", dirs * T, h, 4 * units, 1);
  recurrent.weight_bytes *= dirs;
  recurrent.repeats = T;
  // Gates: read the four pre-activations and the cell state, write c, h and tanh(c).
  OpSpec gates = elementwise_op("lstm_gates", dirs * T * units, 20, 8, 10);
  gates.repeats = T;
  return {input, recurrent, gates};
}

ShapeCost apply_shape_op(const ShapeOp& op, ShapeState& state) {
  return std::visit(Apply{state}, op);
}

}  // namespace internal

Layer shape_layer(std::string name, const ShapeOp& op, bool drop_carried, ShapeState& state,
                  const Training& training, const GpuSpec& gpu) {
  const ShapeCost c = internal::apply_shape_op(op, state);
  if (drop_carried) state.carried.clear();
  const double b = static_cast<double>(training.micro_batch);
  const double elem = static_cast<double>(element_bytes(training.precision));
  double out = tensor_bytes(state.current, elem);
  for (const auto& t : state.carried) out += tensor_bytes(t, elem);
  const double flops = c.flops * b;
  if (!(flops < 1e30)) too_large("a layer's FLOPs");
  std::vector<OpSpec> ops = scaled_ops(c, b, elem);
  Layer x = layer_from_ops(
      std::move(name), ops, flops, to_whole(c.params, "a layer's parameters"),
      to_whole((c.activation_elements * elem + c.activation_id_bytes) * b, "a layer's activations"),
      to_whole(out * b, "a layer's output"), training, gpu);
  x.sample_retime = ops_sample_retime(std::move(ops), training, gpu);
  return x;
}

int64_t shape_input_bytes(const TensorShape& input, const Training& training) {
  const double elem = static_cast<double>(element_bytes(training.precision));
  return to_whole(tensor_bytes(input, elem) * static_cast<double>(training.micro_batch),
                  "the model's input");
}

}  // namespace pipesim
