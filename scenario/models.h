// Models generated from their shapes: per-layer FLOPs, parameters, activation and output
// bytes, and times from per-op rooflines (scenario/roofline.h).
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
//             (forward_flops; the element-wise ops' FLOPs are not counted there)
//   times     per op (scenario/roofline.h): layer norms, QKV, scores, softmax, attention
//             dropout, values (or one fused flash-attention op), projection, dropout + residual,
//             the two MLP GEMMs with GeLU between; GEMMs with weights take the forward's
//             FLOPs again for B and for W, the attention GEMMs twice the forward in B.
//   activations (Korthikanti et al. 2022): 16-bit tensors 32 sbh + 4 a s^2 b, one-byte
//     dropout masks 2 sbh + a s^2 b, i.e. sbh (34 + 5 a s / h) bytes with 16-bit elements;
//     fp32 doubles the tensors; flash attention drops the s^2 terms.
// Embedding: vocab x h + sequence x h parameters; the head: 2 b s h vocab FLOPs, its
// logits (and the fp32 softmax) as activations.
Model transformer_model(const TransformerShape& shape, const Training& training,
                        const GpuSpec& gpu);

}  // namespace pipesim
