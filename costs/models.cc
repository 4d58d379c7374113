#include "costs/models.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/checked.h"
#include "core/error.h"
#include "costs/internal/layer_ops.h"
#include "costs/internal/recompute_parts.h"
#include "costs/roofline.h"

namespace pipesim {

namespace {

using internal::kv_features;
using internal::mlp_ops;
using internal::moe_ops;
using internal::norm_op;
using internal::norm_params;
using internal::Quant;
using internal::quant_of;
using internal::query_width;
using internal::weight_gemm;

// The width the attention kernel computes a head at: its own, or for the Triton kernel the
// next power of two (flash_attn_triton's BLOCK_HEADDIM; the padded columns are masked
// loads and real multiply-adds).
double kernel_head_dim(const TransformerShape& t, int64_t d) {
  if (t.attention_kernel != AttentionKernel::kTriton) return static_cast<double>(d);
  return static_cast<double>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(d, 16))));
}

// Which part of a transformer layer an op belongs to (LayerPiece).
PieceKind piece_of(const std::string& op, bool moe) {
  static const std::vector<std::string> pre{
      "ln1",          "qkv",     "cast_qkv",     "rotary",  "q_down",  "cast_q_down",
      "q_norm",       "q_up",    "cast_q_up",    "kv_down", "cast_kv_down", "kv_norm",
      "kv_up",        "cast_kv_up"};
  static const std::vector<std::string> core{"flash_attention", "scores", "softmax",
                                             "attention_dropout", "values"};
  static const std::vector<std::string> post{"projection", "cast_projection", "dropout_add1"};
  const auto in = [&](const std::vector<std::string>& v) {
    return std::find(v.begin(), v.end(), op) != v.end();
  };
  if (in(pre)) return PieceKind::kPreAttention;
  if (in(core)) return PieceKind::kAttention;
  if (in(post)) return PieceKind::kPostAttention;
  if (!moe) return PieceKind::kMlp;
  if (op == "ln2" || op.starts_with("router") || op == "permute") return PieceKind::kPreExperts;
  if (op.find("shared_") != std::string::npos) return PieceKind::kSharedExperts;
  if (op.find("expert_") != std::string::npos) return PieceKind::kExperts;
  return PieceKind::kPostExperts;
}

// The layer's parts in forward order, each the sum of its ops' times (kinds[i]: op i's).
std::vector<LayerPiece> pieces_of(const Layer& x, const std::vector<PieceKind>& kinds) {
  std::vector<LayerPiece> out;
  for (size_t i = 0; i < x.ops.size(); ++i) {
    const OpCost& op = x.ops[i];
    const PieceKind kind = kinds[i];
    if (out.empty() || out.back().kind != kind) out.push_back({kind, {}, {}, {}, {}, {}, {}});
    LayerPiece& p = out.back();
    p.forward += op.forward;
    p.backward_input += op.backward_input;
    p.backward_weight += op.backward_weight;
    // (The backward runs the piece's ops in reverse: what precedes the row-parallel GEMM's
    // input gradient there is what follows it here.)
    if (op.name == "qkv" || op.name == "q_up" || op.name == "kv_up" || op.name == "fc1")
      p.lead_forward = p.forward;
    if (op.name == "projection" || op.name == "fc2") {
      p.tail_forward = op.forward;
      p.lead_backward = op.backward_input;
    } else if (p.tail_forward > Time::zero()) {
      p.lead_backward += op.backward_input + op.backward_weight;
    }
  }
  return out;
}

// DeepSeek's multi-head latent attention (models.h), up to the projection: the queries
// through a q_rank bottleneck (or straight from h without one), keys and values through a
// kv_rank bottleneck plus one shared rotary key of rope_dim, fused attention over heads of
// head_dim + rope_dim (queries and keys) and head_dim (values).
void latent_attention_ops(std::vector<OpSpec>& ops, const TransformerShape& t, double b, double e,
                          const Quant& q) {
  const TransformerShape::Latent& l = *t.latent;
  const double s = static_cast<double>(t.sequence), h = static_cast<double>(t.hidden);
  const double a = static_cast<double>(t.heads), bs = b * s;
  const double qr = static_cast<double>(l.q_rank), kr = static_cast<double>(l.kv_rank);
  const double dr = static_cast<double>(l.rope_dim), dv = static_cast<double>(l.head_dim);
  const double dqk = dv + dr;
  ops.push_back(norm_op("ln1", t, bs * h, e));
  if (l.q_rank > 0) {
    weight_gemm(ops, "q_down", bs, h, qr, e, q);
    ops.push_back(norm_op("q_norm", t, bs * qr, e));
    weight_gemm(ops, "q_up", bs, qr, a * dqk, e, q);
  } else {
    weight_gemm(ops, "q_up", bs, h, a * dqk, e, q);
  }
  weight_gemm(ops, "kv_down", bs, h, kr + dr, e, q);
  ops.push_back(norm_op("kv_norm", t, bs * kr, e));
  weight_gemm(ops, "kv_up", bs, kr, a * (dqk - dr + dv), e, q);
  if (t.position == TransformerShape::Position::kRotary)
    ops.push_back(elementwise_op("rotary", bs * (a * dr + dr), 3, 2 * e, 2 * e));
  OpSpec att;
  att.name = "flash_attention";
  att.attention = t.attention_kernel;
  const double mask = t.causal ? 0.5 : 1.0;
  const double width =
      kernel_head_dim(t, l.head_dim + l.rope_dim) + kernel_head_dim(t, l.head_dim);
  att.forward = {mask * 2 * b * s * s * a * width, e * bs * a * (2 * dqk + 2 * dv)};
  att.backward_input = {mask * 5 * b * s * s * a * width, e * bs * a * (4 * dqk + 4 * dv)};
  ops.push_back(att);
  weight_gemm(ops, "projection", bs, a * dv, h, e, q);
}

// The ops of one transformer layer (see models.h) for b sequences of s tokens.
// A transformer layer's standard attention block up to the projection, for b sequences of
// s tokens: queries heads x head_dim wide (the hidden size unless head_dim says otherwise),
// keys and values as kv_features; h below is the queries' width.
void attention_ops(std::vector<OpSpec>& ops, const TransformerShape& t, double b, double e,
                   const Quant& q) {
  const double s = static_cast<double>(t.sequence), hm = static_cast<double>(t.hidden);
  const double h = static_cast<double>(query_width(t));
  const double a = static_cast<double>(t.heads);
  const double bs = b * s, sbh = s * b * h, as2b = a * s * s * b;
  const double r = static_cast<double>(kv_features(t)) / (2 * h);  // keys' width / queries'
  ops.push_back(norm_op("ln1", t, s * b * hm, e));
  weight_gemm(ops, "qkv", bs, hm, (1 + 2 * r) * h, e, q);
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
    // The Triton kernel computes each head at its padded width (kernel_head_dim).
    OpSpec att;
    att.name = "flash_attention";
    att.attention = t.attention_kernel;
    const double mask = t.causal ? 0.5 : 1.0;  // the share of the s^2 blocks it runs
    const double d = h / a, pad = kernel_head_dim(t, static_cast<int64_t>(d)) / d;
    att.forward = {mask * 4 * b * s * s * h * pad, e * (2 + 2 * r) * sbh};
    att.backward_input = {mask * 10 * b * s * s * h * pad, e * (4 + 4 * r) * sbh};
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
  weight_gemm(ops, "projection", bs, h, hm, e, q);
}

std::vector<OpSpec> layer_ops(const TransformerShape& t, double b, double e, const Quant& q,
                              bool moe = false) {
  const double s = static_cast<double>(t.sequence), h = static_cast<double>(t.hidden);
  const double f = static_cast<double>(t.ffn);
  const double bs = b * s, sbh = s * b * h;
  std::vector<OpSpec> ops;
  if (t.latent)
    latent_attention_ops(ops, t, b, e, q);
  else
    attention_ops(ops, t, b, e, q);
  // Bias, dropout and residual add fused: reads x and the residual, writes y and the mask.
  ops.push_back(elementwise_op("dropout_add1", sbh, 2, 3 * e + 1, 2 * e + 1));
  ops.push_back(norm_op("ln2", t, sbh, e));
  if (moe)
    moe_ops(ops, t, bs, e, q);
  else
    mlp_ops(ops, t, "", bs, f, e, q);
  ops.push_back(elementwise_op("dropout_add2", sbh, 2, 3 * e + 1, 2 * e + 1));
  return ops;
}

// The ops outside Megatron's tensor-parallel region of a transformer layer: without
// sequence parallelism every rank of the group runs them whole.
bool outside_tensor_region(const std::string& op) {
  return op == "ln1" || op == "dropout_add1" || op == "ln2" || op == "dropout_add2" ||
         op == "q_down" || op == "cast_q_down" || op == "q_norm" || op == "kv_down" ||
         op == "cast_kv_down" || op == "kv_norm";
}

// Sets the layer's tp_whole_* times: the sums over its ops `whole` picks.
template <typename Pred>
void set_whole_ops(Layer& x, Pred whole) {
  for (OpCost& op : x.ops) {
    if (!whole(op.name)) continue;
    op.tensor_whole = true;
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

// A MoE layer's routed experts, as mlp_ops builds their ops: `tokens` routed copies over
// E experts of width F.
struct RoutedExperts {
  TransformerShape shape;
  double tokens = 0, F = 0, E = 0, element = 2;
  Quant q;
};
struct Degrees {
  int tensor = 1, expert = 1, context = 1, expert_tensor = 1;
};

// The layer's ops at these degrees, for the whole layer (the lowering divides by tensor x
// context): every op the tensor group splits as tensor x context equal shards, each at the
// efficiency of its own size (OpSpec::repeats prices exactly that), the ones it keeps whole
// as context shards; a routed expert's ops as E tensor context / expert pieces, one per
// local expert of one rank (E / expert of them), each on the tokens the expert ranks send
// it, gathered over the expert-tensor ranks (expert_tensor times the rows) at 1/expert_tensor
// of the expert's width, each reading its own expert's share of the weights once.
std::vector<OpSpec> ops_at_degrees(const std::vector<OpSpec>& ops,
                                   const std::vector<PieceKind>& kinds,
                                   const std::vector<char>& whole, const RoutedExperts& routed,
                                   const Degrees& d) {
  std::vector<OpSpec> split = ops;
  std::vector<OpSpec> experts;
  const int etp = d.expert_tensor;
  if (etp > 1)
    mlp_ops(experts, routed.shape, "expert_", routed.tokens * etp, routed.F / etp, routed.element,
            routed.q, routed.E);
  size_t next = 0;  // the next of `experts`
  for (size_t i = 0; i < split.size(); ++i) {
    OpSpec& op = split[i];
    if (kinds[i] == PieceKind::kExperts) {
      if (etp > 1) {
        PIPESIM_ASSERT(next < experts.size() && experts[next].name == op.name,
                       "an expert's ops are the same at every width");
        op = experts[next++];
      }
      op.repeats = routed.E * d.tensor * d.context / d.expert;
      op.weight_bytes = op.weight_bytes / routed.E * op.repeats;
    } else {
      // Each tensor rank reads its 1/t of the weights, once per context rank or sample
      // share (roofline spreads weight_bytes over the repeats).
      op.split_rows(d.context);
      if (!whole[i]) op.repeats *= d.tensor;
    }
  }
  return split;
}

// One transformer layer, dense or MoE (models.h), with what tensor, context and expert
// parallelism need of it.
Layer block_layer(const TransformerShape& t, bool moe, const Training& training,
                  const GpuSpec& gpu) {
  const double b = static_cast<double>(training.micro_batch);
  const double s = static_cast<double>(t.sequence), h = static_cast<double>(t.hidden);
  const double a = static_cast<double>(t.heads), f = static_cast<double>(t.ffn);
  const int64_t elem = element_bytes(training.precision);
  const double e = static_cast<double>(elem);
  const auto sbh = static_cast<int64_t>(s * b * h);
  const auto as2b = static_cast<int64_t>(a * s * s * b);
  const Quant q = quant_of(training.precision);
  // What a quantized GEMM's kept input saves per element against its 16-bit copy.
  const double saved = e - q.kept_input(e);
  const std::vector<OpSpec> ops = layer_ops(t, b, e, q, moe);
  const int64_t kv = kv_features(t);
  // An MLP of width w: two h x w matrices (GeLU) or three (gated, the first two as one
  // 2w-wide GEMM), with their biases.
  const auto mlp_params = [&](int64_t w) {
    return t.gated() ? 3 * t.hidden * w + 2 * w + t.hidden : 2 * t.hidden * w + w + t.hidden;
  };
  // Queries q = heads x head_dim wide (h unless head_dim says otherwise): QKV h x (q + kv)
  // and its biases, the projection q x h and its bias.
  const int64_t qw = query_width(t);
  const double qd = static_cast<double>(qw);
  int64_t attention_params = t.hidden * (qw + kv) + qw + kv + qw * t.hidden + t.hidden;
  double kvd = static_cast<double>(kv);
  double attention_flops = 2 * b * s * h * (qd + kvd) + 4 * b * s * s * qd + 2 * b * s * qd * h;
  // Latent attention (models.h): its own projections, and the 16-bit tensors it keeps in
  // place of Korthikanti's attention terms (in the units of `tensors` below: 2 per element).
  int64_t latent_tensors = 0;
  if (t.latent) {
    const TransformerShape::Latent& l = *t.latent;
    const int64_t ah = t.heads, d = l.head_dim, r = l.rope_dim;
    attention_params = (l.q_rank > 0 ? t.hidden * l.q_rank + l.q_rank + l.q_rank * ah * (d + r)
                                     : t.hidden * ah * (d + r)) +
                       t.hidden * (l.kv_rank + r) + l.kv_rank + l.kv_rank * ah * 2 * d +
                       ah * d * t.hidden;
    const double q = static_cast<double>(l.q_rank), c = static_cast<double>(l.kv_rank);
    const double A = static_cast<double>(ah), D = static_cast<double>(d),
                 R = static_cast<double>(r);
    attention_flops = 2 * b * s * ((q > 0 ? h * q + q * A * (D + R) : h * A * (D + R)) +
                                   h * (c + R) + c * A * 2 * D + A * D * h) +
                      2 * b * s * s * A * (2 * D + R);
    kvd = A * (2 * D + R);  // keys (with their rotary part) and values
    latent_tensors = static_cast<int64_t>(2 * s * b * (2 * h + 2 * q + 2 * c + A * (4 * D + 2 * R)));
  }
  const double gate = t.gated() ? 6 : 4;  // MLP FLOPs per token, per h x width
  const double E = t.experts, k = t.top_k, F = static_cast<double>(t.routed_ffn());
  const double shared_f = F * t.shared_experts;
  const int64_t expert_params = moe ? t.experts * mlp_params(t.routed_ffn()) : 0;
  const int64_t mlp_part =
      moe ? t.hidden * t.experts + expert_params +
                (t.shared_experts > 0 ? mlp_params(t.routed_ffn() * t.shared_experts) : 0)
          : mlp_params(t.ffn);
  const int64_t layer_params = attention_params + mlp_part + 2 * norm_params(t);
  const double layer_flops =
      attention_flops + (moe ? 2 * b * s * h * E + gate * b * s * h * (k * F + shared_f)
                             : gate * b * s * h * f);
  // Korthikanti's 32 sbh holds 2 sbh each of keys and values; grouped, they are 2 r sbh.
  // Its MLP keeps the GeLU's input and output, 2f elements per token (16 sbh at f = 4h);
  // a gated MLP keeps the gate and value (2f) and their product (f): 3f. The other 12 sbh:
  // the two norms' inputs, the QKV and fc1 inputs, the queries, the projection's input.
  const auto kv_tensors = static_cast<int64_t>(s * b * kvd);
  // Under fp8 or NVFP4 the four weight GEMMs keep their inputs' quantized copies: QKV's, the
  // projection's and fc1's sbh and fc2's sbf elements at `saved` bytes fewer than 16 bits (a
  // MoE layer: the first two).
  // A MoE layer keeps (in 16-bit units) the router's fp32 probabilities (2 sbE), the
  // permuted tokens and the experts' outputs (2 x 2 k sbh), the experts' MLP tensors for
  // k sb tokens and the shared experts'. Quantized, the grouped GEMMs keep their inputs'
  // copies as the dense ones do: the permuted tokens (k sbh) and the experts' fc2 inputs
  // (k sbF); the shared experts keep a copy of the normed input the router keeps in 16 bits
  // (+sbh at the operand's bytes) and their fc2 input quantized.
  const double moe_quantized_saved =
      saved * (k * s * b * (h + F) + s * b * shared_f) - (shared_f > 0 ? s * b * h * q.operand : 0);
  const auto mlp_tensors =
      moe ? static_cast<int64_t>(2 * s * b * E + 4 * k * s * b * h + gate * k * s * b * F +
                                 gate * s * b * shared_f - moe_quantized_saved)
          : static_cast<int64_t>(gate * s * b * f - saved * s * b * f);
  // (Latent attention: its own tensors, and the MLP block's norm and first GEMM inputs.)
  // (The queries and the projection's input are q wide: 4 sbq of the 12 sbh.)
  const auto sbq = static_cast<int64_t>(s * b * qd);
  const int64_t tensors =
      (t.latent ? latent_tensors + 4 * sbh
                : (t.flash_attention ? 8 * sbh : 8 * sbh + 4 * as2b) + 4 * sbq + 2 * kv_tensors) -
      static_cast<int64_t>(saved * (moe ? 2 : 3) * static_cast<double>(sbh)) + mlp_tensors;
  const int64_t masks = t.flash_attention ? 2 * sbh : 2 * sbh + as2b;
  const int64_t activation = tensors * elem / 2 + masks;
  Layer x = layer_from_ops("layer", ops, layer_flops, layer_params, activation, sbh * elem,
                           training, gpu);
  // Each op's part and whether it lies outside the tensor-parallel region, once (the
  // retime below runs for every layer of every strategy costed).
  std::vector<PieceKind> kinds;
  std::vector<char> whole;
  for (const OpSpec& op : ops) {
    kinds.push_back(piece_of(op.name, moe));
    whole.push_back(outside_tensor_region(op.name) ? 1 : 0);
  }
  x.pieces = pieces_of(x, kinds);
  const double queries = t.latent ? static_cast<double>(t.heads * (t.latent->head_dim +
                                                                    t.latent->rope_dim))
                                  : qd;
  x.attention =
      AttentionFacts{kv_tensors * elem, static_cast<int64_t>(s * b * (queries + kvd)) * elem};
  if (moe) {
    x.moe = MoeFacts{t.experts,
                     t.top_k,
                     expert_params,
                     static_cast<int64_t>(s * b * k * h) * elem,
                     t.capacity_factor,
                     t.routed_ffn(),
                     mlp_tensors * elem / 2};
  }
  // Megatron-LM: column-parallel QKV and first MLP GEMM, row-parallel projection and
  // second GEMM: one all-reduce of the b x s x h output after attention and one after the
  // MLP, and the same two on the input gradients in the backward. Without sequence
  // parallelism the layer-norm inputs (2 x 2sbh), the two dropout masks (2sbh) and the
  // attention and MLP inputs' copies (4sbh) stay whole: 10sbh of the 34sbh. A MoE layer's
  // experts are whole on each tensor rank (expert_tensor 1): only the attention block's.
  x.tensor_parallel = true;
  x.tp_forward_allreduces = x.tp_backward_allreduces = moe ? 1 : 2;
  x.tp_allreduce_bytes = sbh * elem;
  x.tp_fp8 = training.precision == Precision::kFp8;
  // The backward reaches the first MLP GEMM's input gradient, then QKV's: each
  // all-reduce can run beside that GEMM's weight gradient (Strategy::tensor_overlap).
  // (Latent attention's column-parallel GEMM there: the queries' up-projection.)
  const char* qkv = t.latent ? "q_up" : "qkv";
  const auto beside = [moe, qkv](const Layer& l) {
    return moe ? std::vector<Time>{weight_gradient_of(l, qkv)}
               : std::vector<Time>{weight_gradient_of(l, "fc1"), weight_gradient_of(l, qkv)};
  };
  x.tp_backward_beside = beside(x);
  set_whole_ops(x, outside_tensor_region);
  // The layer at other degrees (ops_at_degrees), each op on the efficiency curves at one
  // rank's size.
  const RoutedExperts routed{t, b * s * k, F, E, e, q};
  x.tensor_retime = std::make_shared<const TensorRetime>(
      [ops, layer_flops, layer_params, activation, sbh, elem, training, gpu, beside, kinds,
       whole, routed](int degree, int ep, int cp, int etp) {
        const std::vector<OpSpec> split =
            ops_at_degrees(ops, kinds, whole, routed, {degree, ep, cp, etp});
        const Layer l = layer_from_ops("layer", split, layer_flops, layer_params, activation,
                                       sbh * elem, training, gpu);
        return TensorTimes{l.forward, l.backward_input, l.backward_weight, beside(l),
                           pieces_of(l, kinds), l.ops};
      });
  // (the attention's and the MLP's inputs as their quantized copies under fp8 or NVFP4; a MoE
  // layer's MLP input is the router's 16 bits, and its shared experts add their own copy)
  const double sbh_d = static_cast<double>(sbh);
  x.tp_replicated_activation = static_cast<int64_t>((5 * e - saved * (moe ? 1 : 2)) * sbh_d +
                                                    (moe && shared_f > 0 ? q.operand * sbh_d : 0));
  // W reads the column-parallel GEMMs' inputs (QKV's and the first MLP GEMM's) whole on
  // every rank: 2sbh of its 16sbh elements (quantized under fp8 or NVFP4).
  x.tp_replicated_weight_activation =
      static_cast<int64_t>(2 * static_cast<double>(sbh) * q.kept_input(e));
  // Norms, two output biases (and a MoE layer's router, whole on every rank).
  x.tp_replicated_params = 2 * norm_params(t) + 2 * t.hidden + (moe ? t.hidden * t.experts : 0);
  x.recompute_parts = internal::recompute_parts(t, moe, x, b, elem, q);
  return x;
}

}  // namespace

namespace {

// Multi-token prediction's depths (TransformerShape::mtp_layers) after the output head,
// three layers each: its input (the shifted tokens' lookup in the shared embedding, two
// norms, the [2h -> h] projection of the pair), its transformer block, and its prediction
// through the shared output head (a copy of the head layer holding no weights of its own:
// a stage without the head keeps one, as for tied embeddings). The block is re-run by a full
// recompute like any other. The head passes the last block's hidden state on to the
// depth's input (Megatron-Core keeps it on the stage; a cut there sends it).
void add_mtp_layers(Model& m, const TransformerShape& t, const Training& training,
                    const GpuSpec& gpu, const Layer& moe, const Layer& dense) {
  const double b = static_cast<double>(training.micro_batch);
  const double s = static_cast<double>(t.sequence), h = static_cast<double>(t.hidden);
  const int64_t elem = element_bytes(training.precision);
  const double e = static_cast<double>(elem);
  const Quant q = quant_of(training.precision);
  const auto sbh = static_cast<int64_t>(s * b * h);
  const Layer head = m.layers.back();
  const int head_index = static_cast<int>(m.layers.size()) - 1;
  for (int k = 0; k < t.mtp_layers; ++k) {
    std::vector<OpSpec> ops{elementwise_op("mtp_lookup", s * b * h, 1, 2 * e, 0),
                            norm_op("mtp_enorm", t, s * b * h, e),
                            norm_op("mtp_hnorm", t, s * b * h, e)};
    weight_gemm(ops, "mtp_proj", s * b, 2 * h, h, e, q);
    // Keeps the two norms' inputs and the projection's input (the pair; quantized under fp8
    // or NVFP4).
    const int64_t kept =
        2 * sbh * elem + static_cast<int64_t>(2 * static_cast<double>(sbh) * q.kept_input(e));
    Layer in = layer_from_ops(fmt::format("mtp{}_in", k), ops, 2 * s * b * 2 * h * h,
                              2 * t.hidden * t.hidden + 2 * norm_params(t), kept, sbh * elem,
                              training, gpu);
    in.sample_retime = ops_sample_retime(ops, training, gpu);
    in.tied_to = 0;  // the shifted tokens' lookup reads the embedding's table
    in.tied_params = t.vocab * t.hidden;
    in.recomputed = false;
    // Under tensor parallelism: the lookup vocabulary-parallel (an all-reduce of its output),
    // the norms whole on every rank, the projection column-parallel on the whole pair (an
    // all-reduce of the pair's gradient in the backward).
    in.tensor_parallel = true;
    in.tp_allreduce_bytes = sbh * elem;
    in.tp_forward_allreduces = 1;
    in.tp_backward_allreduces = 1;
    in.tp_replicated_activation = kept;
    in.tp_replicated_params = 2 * norm_params(t);
    set_whole_ops(in, [](const std::string& op) { return op == "mtp_enorm" || op == "mtp_hnorm"; });
    m.layers.push_back(std::move(in));
    m.layers.push_back(t.moe_layer(t.layers + k) ? moe : dense);
    m.layers.back().name = fmt::format("mtp{}", k);
    Layer out = head;
    out.name = fmt::format("mtp{}_head", k);
    out.params = norm_params(t);  // its own final norm; the projection is the head's
    out.tied_to = t.tie_embeddings ? 0 : head_index;
    out.tied_params = t.vocab * t.hidden;
    // The hidden state the next depth reads passes on (a stage may end here).
    out.output_bytes = k + 1 < t.mtp_layers ? sbh * elem : 0;
    m.layers.push_back(std::move(out));
  }
  if (t.mtp_layers > 0) m.layers[static_cast<size_t>(head_index)].output_bytes = sbh * elem;
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
       {66 * s * b * h + 12 * s * b * f + 9 * a * s * s * b, s * b * V * 8, 2 * b * s * h * V,
        s * b * (8.0 * t.experts + t.top_k * (8 * h + 12.0 * static_cast<double>(t.routed_ffn())))}) {
    if (!(v < 4e18)) too_large("the generated model's activations or FLOPs");
  }
  const auto sbh = static_cast<int64_t>(s * b * h);
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
  m.layers.back().sample_retime = ops_sample_retime({lookup}, training, gpu);
  m.layers.back().tp_replicated_activation = sbh;
  m.layers.back().tp_replicated_weight_activation = sbh;
  m.layers.back().tp_replicated_params = positions;
  // Every dense layer is the same, and every MoE layer: cost each once.
  const Layer dense = block_layer(t, false, training, gpu);
  const Layer moe = t.experts > 0 ? block_layer(t, true, training, gpu) : Layer{};
  for (int i = 0; i < t.layers; ++i) {
    m.layers.push_back(t.moe_layer(i) ? moe : dense);
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
  m.layers.back().sample_retime = ops_sample_retime(head_ops, training, gpu);
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
  add_mtp_layers(m, t, training, gpu, moe, dense);
  return m;
}

}  // namespace pipesim
