// Models generated from their shapes: per-layer FLOPs, parameters, activation and output
// bytes, and times from FLOPs / (GPU peak x efficiency).
#pragma once

#include <cstdint>
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
};

// Per transformer layer, for b sequences of s tokens, hidden h, heads a, ffn f:
//   params    4h^2 + 4h (attention) + 2hf + f + h (MLP) + 4h (two layer norms)
//   forward   2bsh(3h) QKV + 2bs^2h scores + 2bs^2h values + 2bsh^2 projection + 4bshf MLP
//   backward  twice the forward, half input gradients (B) and half weight gradients (W)
//   activations (Korthikanti et al. 2022): 16-bit tensors 32 sbh + 4 a s^2 b, one-byte
//     dropout masks 2 sbh + a s^2 b, i.e. sbh (34 + 5 a s / h) bytes with 16-bit elements;
//     fp32 doubles the tensors; flash attention drops the s^2 terms.
// Embedding: vocab x h + sequence x h parameters; the head: 2 b s h vocab FLOPs, its
// logits (and the fp32 softmax) as activations.
Model transformer_model(const TransformerShape& shape, const Training& training,
                        const GpuSpec& gpu);

// FLOPs -> time on this GPU at its efficiency, for the training precision.
Time analytic_time(double flops, const GpuSpec& gpu, Precision p);

// A layer whose times come from its forward FLOPs (for one micro-batch): the backward is
// twice the forward, split evenly into input gradients (B) and weight gradients (W).
Layer analytic_layer(std::string name, double forward_flops, int64_t params,
                     int64_t activation_bytes, int64_t output_bytes, const Training& training,
                     const GpuSpec& gpu);

}  // namespace pipesim
