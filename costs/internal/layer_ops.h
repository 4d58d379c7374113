// The weight GEMMs and MLP blocks of a generated transformer layer as ops, in 16 bits or on
// Transformer Engine's low-precision recipes: shared by costs/models.cc (the layers and
// their multi-token-prediction depths). Internal to costs/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costs/models.h"
#include "costs/roofline.h"

namespace pipesim::internal {

// The weight GEMMs' low precision (Transformer Engine's recipes): bytes per element of a
// quantized operand (0: the GEMMs run in 16 bits), and what a cast to it moves per element:
// `cast_reads` passes over the 16-bit input and `cast_writes` bytes written.
// - fp8: 1-byte operands; one pass reading 16 bits and writing 8 (its amax on the way).
// - NVFP4 (NVFP4BlockScaling): E2M1 values, 4 bits, and an E4M3 scale per 16 of them: 0.5625
//   bytes an element; two passes (the tensor's amax for its fp32 scale, then the cast) and
//   two copies written, row-wise for this GEMM and column-wise for the one that reads it
//   transposed (TE quantizes each operand both ways; the weight gradient's copy after a
//   random Hadamard transform, a 16 x 16 block product the pass absorbs).
struct Quant {
  double operand = 0, cast_reads = 0, cast_writes = 0;
  bool on() const { return operand > 0; }
  // The bytes an element of a weight GEMM's input takes as the GEMM keeps it for its weight
  // gradient: the quantized copy, or the 16-bit (`e`-byte) tensor itself.
  double kept_input(double e) const { return on() ? operand : e; }
};
Quant quant_of(Precision p);

// Features of the keys and the values together: 2h, or 2 r h with r = query_groups / heads
// (grouped-query attention).
int64_t kv_features(const TransformerShape& t);

// The queries' width: heads x head_dim (the hidden size unless head_dim says otherwise).
int64_t query_width(const TransformerShape& t);

// A layer norm or RMSNorm over `elements`: reads x, writes y; its backward reads x and dy,
// writes dx. RMSNorm skips the mean and the bias: about half the FLOPs.
OpSpec norm_op(const char* name, const TransformerShape& t, double elements, double e);

// Parameters of one norm: a scale, and a bias for LayerNorm.
int64_t norm_params(const TransformerShape& t);

// A weight GEMM of the layer, [m, k] by [k, n]. Under fp8 or NVFP4 (Transformer Engine's
// recipes, Quant) it runs at that format's peak on quantized operands: the forward reads
// the quantized input and weight and writes a 16-bit output, B reads the quantized output
// gradient and writes a 16-bit input gradient, W reads the quantized input and output
// gradient; before it, a cast turns the input into the format in the forward and the output
// gradient in the backward (Quant::cast_reads and cast_writes bytes per element).
void weight_gemm(std::vector<OpSpec>& ops, const char* name, double m, double k, double n, double e,
                 const Quant& q);

// A weight GEMM of routed experts: `experts` equal pieces of the [m, k] x [k, n] product
// (each expert's tokens), each reading its own expert's weights.
void expert_gemm(std::vector<OpSpec>& ops, const char* name, double m, double k, double n, double e,
                 const Quant& q, double experts);

// The MLP block's ops after the second norm: the dense MLP of `f` on b s tokens, or the
// named parts of an expert's (prefix "expert_" or "shared_") on `tokens` tokens, `experts`
// of them (0: a dense MLP).
void mlp_ops(std::vector<OpSpec>& ops, const TransformerShape& t, const std::string& prefix,
             double tokens, double f, double e, const Quant& q, double experts = 0);

// A MoE layer's MLP block after its norm (models.h): router, permutation, routed experts,
// un-permutation, shared experts.
void moe_ops(std::vector<OpSpec>& ops, const TransformerShape& t, double bs, double e,
             const Quant& q);

}  // namespace pipesim::internal
