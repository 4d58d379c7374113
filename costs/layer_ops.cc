#include "costs/internal/layer_ops.h"

namespace pipesim::internal {

int64_t kv_features(const TransformerShape& t) {
  const int64_t d = t.head_dim > 0 ? t.head_dim : t.hidden / t.heads;
  return 2 * (t.query_groups > 0 ? t.query_groups : t.heads) * d;
}

int64_t query_width(const TransformerShape& t) {
  return t.head_dim > 0 ? t.heads * t.head_dim : t.hidden;
}

Quant quant_of(Precision p) {
  if (p == Precision::kFp8) return {1, 1, 1};
  if (p == Precision::kNvfp4) return {0.5625, 2, 2 * 0.5625};
  return {};
}

OpSpec norm_op(const char* name, const TransformerShape& t, double elements, double e) {
  const double flops = t.norm == TransformerShape::Norm::kRmsNorm ? 4 : 8;
  return elementwise_op(name, elements, flops, 2 * e, 3 * e);
}

int64_t norm_params(const TransformerShape& t) {
  return t.norm == TransformerShape::Norm::kRmsNorm ? t.hidden : 2 * t.hidden;
}

void weight_gemm(std::vector<OpSpec>& ops, const char* name, double m, double k, double n, double e,
                 const Quant& q) {
  if (!q.on()) {
    ops.push_back(gemm_op(name, m, k, n, e));
    return;
  }
  OpSpec cast;
  cast.name = std::string("cast_") + name;
  cast.matrix = false;
  const double moved = q.cast_reads * e + q.cast_writes;
  cast.forward = {2 * m * k, moved * m * k};
  cast.backward_input = {2 * m * n, moved * m * n};
  ops.push_back(cast);
  OpSpec g = gemm_op(name, m, k, n, q.operand);
  g.forward.bytes = q.operand * m * k + e * m * n;
  g.backward_input.bytes = q.operand * m * n + e * m * k;
  g.quantized = true;
  ops.push_back(g);
}

void expert_gemm(std::vector<OpSpec>& ops, const char* name, double m, double k, double n, double e,
                 const Quant& q, double experts) {
  weight_gemm(ops, name, m, k, n, e, q);
  OpSpec& g = ops.back();
  g.weight_bytes *= experts;
  g.repeats = experts;
}

void mlp_ops(std::vector<OpSpec>& ops, const TransformerShape& t, const std::string& prefix,
             double tokens, double f, double e, const Quant& q, double experts) {
  const double h = static_cast<double>(t.hidden);
  const auto gemm = [&](const std::string& name, double k, double n) {
    if (experts > 0)
      expert_gemm(ops, name.c_str(), tokens, k, n, e, q, experts);
    else
      weight_gemm(ops, name.c_str(), tokens, k, n, e, q);
  };
  if (t.gated()) {
    // Gate and value in one GEMM (2f wide), then act(gate) x value: reads both, writes the
    // product; the backward reads both and the product's gradient, writes two gradients.
    gemm(prefix + "fc1", h, 2 * f);
    const double act = t.mlp == TransformerShape::Mlp::kSwiglu ? 6 : 9;  // SiLU or GeLU, x
    ops.push_back(
        elementwise_op(prefix + (t.mlp == TransformerShape::Mlp::kSwiglu ? "swiglu" : "geglu"),
                       tokens * f, act, 3 * e, 5 * e));
  } else {
    gemm(prefix + "fc1", h, f);
    ops.push_back(elementwise_op(prefix + "gelu", tokens * f, 8, 2 * e, 3 * e));
  }
  gemm(prefix + "fc2", f, h);
}

void moe_ops(std::vector<OpSpec>& ops, const TransformerShape& t, double bs, double e,
             const Quant& q) {
  const double h = static_cast<double>(t.hidden), E = t.experts, k = t.top_k;
  const double F = static_cast<double>(t.routed_ffn());
  ops.push_back(gemm_op("router", bs, h, E, e));
  // Softmax and top-k over the E scores of each token, in fp32.
  ops.push_back(elementwise_op("router_topk", bs * E, 8, 8, 12));
  // Each token copied to its k experts' rows: reads h, writes k h (and the backward the
  // reverse, summing).
  ops.push_back(elementwise_op("permute", bs * k * h, 0, 2 * e, 2 * e));
  mlp_ops(ops, t, "expert_", bs * k, F, e, q, E);
  // The k expert outputs of each token weighted by its router probabilities and summed.
  ops.push_back(elementwise_op("unpermute", bs * k * h, 2, 2 * e, 3 * e));
  if (t.shared_experts > 0) mlp_ops(ops, t, "shared_", bs, F * t.shared_experts, e, q);
}

}  // namespace pipesim::internal
