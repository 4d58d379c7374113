// Models generated from their shapes: per-layer FLOPs, parameters, activation and output
// bytes, and times from per-op rooflines (costs/roofline.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "schedules/model.h"
#include "topology/presets.h"

namespace pipesim {

// A GPT/BERT-style decoder or encoder stack with embedding and output layers.
struct TransformerShape {
  int layers = 1;
  int64_t hidden = 1024;
  int64_t heads = 16;
  int64_t ffn = 4096;
  int64_t sequence = 1024;
  int64_t vocab = 50257;
  bool flash_attention = false;  // fused attention keeps no s^2 tensors
  bool tie_embeddings = true;    // the output head reuses the input embedding
  int64_t query_groups = 0;      // key/value heads (grouped-query attention); 0: one per head
  int64_t head_dim = 0;          // each head's width; 0: hidden / heads (Qwen3: 128 anyway)
  // The MLP: GeLU between two GEMMs, or a gated unit (SwiGLU, GeGLU: Shazeer 2020) whose
  // first GEMM makes the gate and the value (2 x ffn wide) and whose activation multiplies
  // them: three hidden x ffn matrices.
  enum class Mlp { kGelu, kSwiglu, kGeglu };
  Mlp mlp = Mlp::kGelu;
  enum class Norm { kLayerNorm, kRmsNorm };  // RMSNorm: no mean, no bias (h parameters)
  Norm norm = Norm::kLayerNorm;
  // Learned absolute positions (sequence x h parameters in the embedding), rotary
  // embeddings applied to the queries and keys (no parameters), or none.
  enum class Position { kLearned, kRotary, kNone };
  Position position = Position::kLearned;
  // A decoder's causal mask: the fused kernel skips the blocks above the diagonal, half
  // the s^2 work (an encoder, causal: false, computes them all).
  bool causal = true;
  bool gated() const { return mlp != Mlp::kGelu; }
  // Mixture of experts (SPEC section 9): `experts` routed experts (0: a dense model), each
  // token's top_k of them, each an MLP of expert_ffn (the MLP's kind); shared_experts run
  // on every token as one MLP of shared_experts x expert_ffn. Layer i >= dense_first is a
  // MoE layer when (i - dense_first) % moe_every == 0 (DeepSeek-V3's first three layers are
  // dense). capacity_factor: an expert takes at most that many times its mean share of the
  // tokens and drops the rest (0: dropless).
  int experts = 0;
  int top_k = 2;
  int64_t expert_ffn = 0;  // 0: ffn
  int shared_experts = 0;
  int moe_every = 1;
  int dense_first = 0;
  double capacity_factor = 0;
  bool moe_layer(int i) const {
    return experts > 0 && i >= dense_first && (i - dense_first) % moe_every == 0;
  }
  int64_t routed_ffn() const { return expert_ffn > 0 ? expert_ffn : ffn; }
  // Multi-token prediction (DeepSeek-V3, arXiv 2412.19437, section 2.2; Megatron-Core's
  // --mtp-num-layers): after the output head, each depth embeds the tokens one further
  // ahead (the shared embedding), norms them and the previous depth's hidden state, projects
  // the pair [2h -> h], runs one more transformer block (a MoE one where layer `layers + k`
  // would be) and predicts through the shared output head with a loss of its own.
  int mtp_layers = 0;
  // DeepSeek's multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, section 2.1):
  // queries through a q_rank bottleneck (0: none), keys and values through a kv_rank one,
  // heads of head_dim plus rope_dim rotary dimensions for queries and keys (one rotary key
  // shared by all heads), head_dim for values; no biases. Needs flash_attention.
  struct Latent {
    int64_t kv_rank = 512, q_rank = 1536, rope_dim = 64, head_dim = 128;
  };
  std::optional<Latent> latent{};
  // Which fused kernel (model.attention_kernel; topology/presets.h): each has its own
  // efficiency curve, and the Triton kernel pads heads to a power of two.
  AttentionKernel attention_kernel = AttentionKernel::kFlash;
};

// Per transformer layer, for b sequences of s tokens, hidden h, heads a, ffn f, and
// r = query_groups / a (1 without grouped-query attention: keys and values are r h wide):
//   params    h(1 + 2r)h + (1 + 2r)h QKV + h^2 + h projection (4h^2 + 4h at r = 1)
//             + 2hf + f + h (MLP) + 4h (two layer norms)
//   forward   2bsh(1 + 2r)h QKV + 2bs^2h scores + 2bs^2h values + 2bsh^2 projection + 4bshf MLP
//             (forward_flops; the element-wise ops' FLOPs are not counted there)
//   times     per op (costs/roofline.h): layer norms, QKV, scores, softmax, attention
//             dropout, values (or one fused flash-attention op), projection, dropout + residual,
//             the two MLP GEMMs with GeLU between; GEMMs with weights take the forward's
//             FLOPs again for B and for W, the attention GEMMs twice the forward in B.
//   gated MLPs (mlp: swiglu | geglu): 3hf + 2f + h MLP parameters, 6bshf MLP FLOPs, and the
//     gate, value and product (6 sbf) kept instead of GeLU's input and output (4 sbf);
//     RMSNorm: h parameters per norm instead of 2h; rotary: no position table, an
//     element-wise rotation of the queries and keys (docs/models.md)
//   activations (Korthikanti et al. 2022): 16-bit tensors 32 sbh + 4 a s^2 b, one-byte
//     dropout masks 2 sbh + a s^2 b, i.e. sbh (34 + 5 a s / h) bytes with 16-bit elements;
//     fp32 doubles the tensors; flash attention drops the s^2 terms. Grouped keys and
//     values keep 4r sbh of the 4 sbh they are at r = 1.
// MoE layers (experts E, top_k k, expert_ffn F, shared experts S, per token): the router
// (h E parameters, 2 b s h E FLOPs, a top-k softmax), the tokens permuted to their experts
// (b s k rows), each expert's MLP as a grouped GEMM whose pieces hold b s k / E rows (on the
// efficiency curves at that size: small experts run less efficiently), the weighted sum back
// (un-permute), and the shared experts as one dense MLP of S F. Parameters: the attention's,
// two norms, the router, E routed and S shared expert MLPs; forward FLOPs count the k routed
// experts a token visits. Activations: the router's fp32 probabilities (b s E), the permuted
// tokens and the experts' outputs (2 b s k h), the experts' MLP tensors (as the dense MLP's
// for b s k tokens of F) and the shared experts'.
// Latent attention (latent: {kv_rank c, q_rank q, rope_dim r, head_dim d}, a heads):
//   params    h q + q + q a (d + r) (queries), h (c + r) + c + c a 2d (keys and values),
//             a d h (projection)
//   forward   2 b s (h q + q a (d + r) + h (c + r) + c a 2d + a d h) + 2 b s^2 a (2d + r)
//   activations (16-bit): the norm and bottleneck inputs 2 sbh + 2 sbq + 2 sbc, the queries,
//             keys, values and output sb a (2(d + r) + 2d); flash attention only
// Embedding: vocab x h + sequence x h parameters (the learned positions stay whole on
// every tensor rank), its dropout mask as activation (its output is the first layer's
// input, kept there). The head: 2 b s h vocab FLOPs; the final layer norm's input and
// output, the logits and their fp32 softmax as activations.
Model transformer_model(const TransformerShape& shape, const Training& training,
                        const GpuSpec& gpu);

}  // namespace pipesim
