// Selective recompute, module by module (Megatron-Core's --recompute-modules), for a
// generated transformer layer. The bytes are costs/models.cc's activation accounting
// (docs/models.md) split by the module that holds each tensor; e below is the training
// precision's bytes per element.
#include "costs/internal/recompute_parts.h"

#include <algorithm>
#include <string>

namespace pipesim::internal {

namespace {

bool core_op(const std::string& op) {
  return op == "flash_attention" || op == "scores" || op == "softmax" ||
         op == "attention_dropout" || op == "values";
}

bool expert_act(const std::string& op) {
  return op == "expert_swiglu" || op == "expert_geglu" || op == "expert_gelu";
}

// A MoE layer's MoE block as Megatron-Core's MoELayer runs it: the router, the permutation,
// the routed experts, the un-permutation and the shared experts (its norm and the residual
// add are the transformer layer's).
bool moe_block(const std::string& op) {
  return op.starts_with("router") || op == "permute" || op == "unpermute" ||
         op.find("expert_") != std::string::npos || op.find("shared_") != std::string::npos;
}

bool up_projection(const std::string& op) {
  return op == "q_norm" || op == "q_up" || op == "cast_q_up" || op == "kv_norm" || op == "kv_up" ||
         op == "cast_kv_up" || op == "rotary";
}

// A dense layer's MLP: the norm Transformer Engine fuses into its first GEMM
// (LayerNormLinear), its GEMMs, their casts and the activation.
bool dense_mlp(const std::string& op) {
  return op == "ln2" || op == "fc1" || op == "cast_fc1" || op == "gelu" || op == "swiglu" ||
         op == "geglu" || op == "fc2" || op == "cast_fc2";
}

// The part of module m re-running `share(op)` of each op (0: not at all), freeing `bytes`
// (`replicated` of them whole on every tensor rank without sequence parallelism).
template <typename Share>
RecomputePart shared_part(RecomputeModule m, const Layer& x, Share share, double bytes,
                          double replicated = 0) {
  RecomputePart p;
  p.module = m;
  for (const OpCost& op : x.ops) {
    const double k = share(op);
    if (k <= 0) continue;
    p.ops.push_back(op.name);
    p.shares.push_back(k);
    const Time forward = share_of(op.forward, k);
    p.cost.forward += forward;
    if (op.tensor_whole) p.whole_forward += forward;
    if (op.matrix) p.cost.flops += op.flops * k;  // (model FLOPs count the GEMMs')
  }
  p.cost.bytes = static_cast<int64_t>(std::max(bytes, 0.0));
  p.cost.replicated_bytes = static_cast<int64_t>(replicated);
  return p;
}

// The part of module m re-running the ops `pick` names, whole.
template <typename Pick>
RecomputePart part(RecomputeModule m, const Layer& x, Pick pick, double bytes,
                   double replicated = 0) {
  return shared_part(
      m, x, [&pick](const OpCost& op) { return pick(op.name) ? 1.0 : 0.0; }, bytes, replicated);
}

// PyTorch's per-op selective checkpointing of a dense layer (torchtitan's `op` policy:
// torch.utils.checkpoint's policy saving the outputs of the attention kernel and of the
// GEMMs but every second one, re-running everything else): every second GEMM of the layer
// in the order it runs them (queries, keys, values, output projection, then the gated MLP's
// gate, up and down projections, or an ungated MLP's two), so the keys' share of QKV (at
// their width), the output projection and the up half of a gated fc1 (or an ungated fc2),
// and every element-wise op. The attention core keeps its output: no longer kept is all but
// the layer's input, the core's output (and its s^2 tensors without flash attention) and
// the saved GEMMs' outputs.
RecomputePart alternate_gemms(const TransformerShape& t, const Layer& x, double S, double e,
                              double core_kept) {
  const double h = static_cast<double>(t.hidden), f = static_cast<double>(t.ffn);
  const double qd = static_cast<double>(query_width(t));
  const double kd = static_cast<double>(kv_features(t)) / 2;  // the keys' width (the values')
  const auto share = [&](const OpCost& op) -> double {
    if (core_op(op.name)) return 0;
    if (!op.matrix) return 1;
    if (op.name == "qkv") return kd / (qd + 2 * kd);
    if (op.name == "projection") return 1;
    if (op.name == "fc1") return t.gated() ? 0.5 : 0;
    if (op.name == "fc2") return t.gated() ? 0 : 1;
    return 0;
  };
  // Kept: the input, the queries, the values, the core's output, and the gate's output and
  // the MLP's (gated), or fc1's (ungated).
  const double kept = S * (h + qd + kd + qd + f + (t.gated() ? h : 0)) * e + core_kept;
  // Without sequence parallelism every tensor rank holds the norms' region whole: of it only
  // the layer's input stays. Under tensor parallelism the gated MLP's saved output is the
  // down projection's partial sum, whole on every rank: it stays whole too.
  const double partial = t.gated() ? S * h * e : 0.0;
  const double replicated =
      std::max(0.0, static_cast<double>(x.tp_replicated_activation) - S * h * e - partial);
  RecomputePart p = shared_part(RecomputeModule::kAlternateGemms, x, share,
                                static_cast<double>(x.activation_bytes) - kept, replicated);
  // The gathered norm outputs the attention's and the MLP's GEMMs read are not saved: the
  // re-run gathers both again (all-reduces without sequence parallelism: their outputs feed
  // the residual stream the norms re-run from).
  p.tp_allreduces = x.tp_forward_allreduces;
  p.regather = true;
  p.pinned = static_cast<int64_t>(partial);
  return p;
}

}  // namespace

std::vector<RecomputePart> recompute_parts(const TransformerShape& t, bool moe, const Layer& x,
                                           double b, int64_t element, const Quant& q) {
  const double s = static_cast<double>(t.sequence), h = static_cast<double>(t.hidden);
  const double a = static_cast<double>(t.heads), S = s * b, e = static_cast<double>(element);
  std::vector<RecomputePart> out;
  // The attention core: keeps its inputs (queries, keys, values) and, without flash
  // attention, no longer keeps its s^2 tensors (Korthikanti et al. 2022, section 4: two
  // 16-bit as^2b tensors and the dropout's byte mask). Flash attention keeps none of them:
  // re-running its kernel saves nothing but its softmax statistics.
  const double as2b = a * s * s * b;
  out.push_back(
      part(RecomputeModule::kCoreAttn, x, core_op, t.flash_attention ? 0 : 2 * as2b * e + as2b));
  // The norms Transformer Engine does not fuse into the GEMM after them (output discarded,
  // re-run before that GEMM's backward): latent attention's first (its down-projections
  // read it) and a MoE layer's second (the router reads it). The standard attention's and a
  // dense MLP's norms are part of TE's LayerNormLinear, which Megatron-Core's `layernorm`
  // leaves alone. Freed: the norm's output as its readers keep it (under fp8 the
  // down-projections' fp8 copy, the router's 16 bits always); whole on every tensor rank
  // without sequence parallelism (Korthikanti's 10sbh).
  const bool first = t.latent.has_value();
  // (A weight GEMM's input as it keeps it: its quantized copy, or 16 bits.)
  const double kept_in = q.kept_input(e);
  const double norms = (first ? S * h * kept_in : 0) + (moe ? S * h * e : 0);
  out.push_back(part(
      RecomputeModule::kLayernorm, x,
      [first, moe](const std::string& op) {
        return (first && op == "ln1") || (moe && op == "ln2");
      },
      norms, norms));
  // The MLP's 16-bit tensors per token and unit of width: fc1's output (2, gated 4) and the
  // activation's (2): 4 or 6 halves of e bytes.
  const double gate = t.gated() ? 6 : 4;
  if (!moe) {
    // A dense MLP checkpointed from its input, the residual stream (its norm is part of
    // TE's LayerNormLinear): no longer kept are the norm's output as fc1 keeps it (its fp8
    // copy under fp8; whole on every tensor rank without sequence parallelism), fc1's output
    // and the activation's (under fp8 fc2 keeps the activation's fp8 copy: S f bytes less).
    const double f = static_cast<double>(t.ffn);
    const double normed = S * h * kept_in;
    out.push_back(part(RecomputeModule::kMlp, x, dense_mlp,
                       normed + gate * S * f * e / 2 - S * f * (e - kept_in), normed));
    // fc1 gathers its input again and fc2 reduces its output again (under sequence
    // parallelism; without it, fc2's all-reduce).
    out.back().tp_allreduces = x.tp_forward_allreduces > 0 ? 1 : 0;
  } else {
    // The routed experts' activation (output discarded): its output, fc2's input, for the
    // k S routed copies.
    const double F = static_cast<double>(t.routed_ffn()), k = t.top_k;
    out.push_back(part(RecomputeModule::kMoeAct, x, expert_act, k * S * F * kept_in));
    // The whole MoE block (Megatron-Core's `moe`: MoELayer's forward checkpointed from its
    // input, the normed hidden states, which stay): everything the block keeps goes, and its
    // re-run dispatches and combines the tokens again.
    RecomputePart block = part(RecomputeModule::kMoe, x, moe_block,
                               x.moe ? static_cast<double>(x.moe->block_bytes) : 0.0);
    block.exchanges = true;
    time_exchanges(block, x.ops);
    out.push_back(block);
    if (t.shared_experts > 0) {
      const double shared = F * t.shared_experts;
      out.push_back(part(
          RecomputeModule::kSharedExperts, x,
          [](const std::string& op) { return op.find("shared_") != std::string::npos; },
          gate * S * shared * e / 2 - S * shared * (e - kept_in) +
              (q.on() ? S * h * q.operand : 0)));
    }
  }
  if (t.latent) {
    // Latent attention's bottleneck norms, up-projections and rotary embedding (output
    // discarded, re-run under no_grad): the queries and keys (head_dim + rope_dim a head)
    // and values (head_dim) the core reads, and the normed bottlenecks the up-projections
    // read (q_rank and kv_rank wide); the compressed tensors stay.
    const TransformerShape::Latent& l = *t.latent;
    const double D = static_cast<double>(l.head_dim), R = static_cast<double>(l.rope_dim);
    const double ranks = static_cast<double>(l.q_rank + l.kv_rank);
    out.push_back(
        part(RecomputeModule::kMlaUpProj, x, up_projection, (a * (3 * D + 2 * R) + ranks) * S * e));
  }
  if (!moe && !t.latent) {
    const double core_kept = t.flash_attention ? 0 : 2 * as2b * e + as2b;
    out.push_back(alternate_gemms(t, x, S, e, core_kept));
  }
  // (Nothing a module frees exceeds what the layer keeps: Layer::selective clamps the sum.)
  for (RecomputePart& p : out) p.cost.bytes = std::min(p.cost.bytes, x.activation_bytes);
  return out;
}

}  // namespace pipesim::internal
