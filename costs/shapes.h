// Models described by their layer shapes (convolutions, pools, fully connected layers,
// ResNet bottlenecks, AmoebaNet-D cells, embeddings, LSTMs, attention): each layer's
// FLOPs, parameters, activation and output sizes follow from the shapes, the tensor shape
// flows from one layer to the next, and times come from FLOPs / (GPU peak x efficiency).
//
// Conventions (per sample; scaled by the micro-batch):
//   FLOPs     2 per multiply-add of convolutions and matrix products; k^2 per output
//             element of a k x k pool; element-wise ops (ReLU, batch norm, additions) are
//             not counted.
//   params    weights and biases; batch norm adds 2 per channel (scale and shift).
//   activation  what the backward needs: each convolution's or matrix product's input,
//             and batch norm's input when there is one (a layer's output is kept by the
//             layer that consumes it); a pool's input; an LSTM's input, previous hidden
//             state, gates, cell state and its tanh per step; attention's inputs, the tanh
//             of its additive scores and the softmax. Elements are `precision`-sized
//             (2 bytes mixed, 4 fp32); token ids are 8 bytes.
//   output    the layer's output tensor plus any tensors carried along with it (the
//             encoder output a decoder attends to, an AmoebaNet cell's second input).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "schedules/model.h"
#include "topology/presets.h"

namespace pipesim {

// A tensor per sample: an image [channels, height, width], a sequence of `tokens` feature
// vectors, a list of token ids, or a flat feature vector.
struct TensorShape {
  enum class Kind { kImage, kSequence, kTokens, kVector };
  Kind kind = Kind::kVector;
  int64_t channels = 0, height = 0, width = 0;  // images
  int64_t tokens = 0;                           // sequences and token ids
  int64_t features = 0;                         // sequences and vectors
  double elements() const;
  std::string describe() const;
};

struct ConvOp {
  int64_t out = 0;
  int64_t kernel = 3;
  int64_t stride = 1;
  int64_t padding = -1;  // -1: kernel / 2 ("same" for odd kernels at stride 1)
  bool bias = true;
  bool batch_norm = false;
};
struct PoolOp {
  bool max = true;
  bool global = false;  // average over the whole image
  int64_t kernel = 2;
  int64_t stride = 0;  // 0: the kernel size
  int64_t padding = 0;
};
struct LinearOp {
  int64_t out = 0;
  bool bias = true;
};
// torchvision's ResNet v1.5 bottleneck: 1x1 (mid), 3x3 (mid, stride), 1x1 (out), each
// with batch norm, plus a 1x1 projection when the stride or width changes.
struct BottleneckOp {
  int64_t mid = 0;
  int64_t out = 0;
  int64_t stride = 1;
};
// An AmoebaNet-D cell (Real et al. 2019) with `channels` filters per operation, as in
// GPipe's model: a normal cell concatenates 4 states, a reduction cell 3 at half the size.
struct AmoebaCellOp {
  int64_t channels = 0;
  bool reduction = false;
};
struct EmbeddingOp {
  int64_t vocab = 0;
  int64_t dim = 0;
  int64_t tokens = 0;  // > 0: reads this many new token ids, carrying the current tensor along
};
struct LstmOp {
  int64_t hidden = 0;
  bool bidirectional = false;
  bool context = false;  // the input is concatenated with the carried attention context
};
// Additive (Bahdanau) attention of the current sequence over the last carried sequence;
// the context vectors join the carried tensors.
struct AttentionOp {
  int64_t hidden = 0;  // 0: the keys' width
};

using ShapeOp = std::variant<ConvOp, PoolOp, LinearOp, BottleneckOp, AmoebaCellOp, EmbeddingOp,
                             LstmOp, AttentionOp>;

// The tensors between two layers: the current one and those carried along with it.
struct ShapeState {
  TensorShape current;
  std::vector<TensorShape> carried;
};

// Applies one op to the state and turns its cost into a Layer for this training setup and
// GPU (analytic_layer), the output being everything passed to the next layer (after
// dropping carried tensors when asked). Throws InputError when the op does not fit the
// incoming shape.
Layer shape_layer(std::string name, const ShapeOp& op, bool drop_carried, ShapeState& state,
                  const Training& training, const GpuSpec& gpu);

// How tensor parallelism splits a linear layer (Megatron-LM): column-parallel with its output
// all-gathered when it stands alone, or the column- and row-parallel halves of a pair of
// consecutive linears (the MLP's fc1 and fc2).
enum class LinearSplit { kGather, kColumn, kRow };

// The tensor split of a shape-described layer whose input is `input` (the state before it),
// for Layer::tensor_split; null for the ops pipesim does not split (bottleneck, AmoebaNet
// cell, embedding). At degree t (docs/parallelism.md, "Shape-described layers"):
//   linear     column: out / t features, the input kept whole, an all-reduce of the input
//              gradient in the backward (kGather: and an all-gather of the output in the
//              forward); row: in / t input features, an all-reduce of the output in the
//              forward.
//   conv       out / t channels (batch norm on those, its statistics being per channel), an
//              all-gather of the output in the forward, an all-reduce of the input gradient in
//              the backward.
//   attention  the attention width a / t (query and key projections, tanh scores); an
//              all-reduce of the partial scores (T x Ts) before the softmax, which with the
//              context runs whole on every rank; an all-reduce of the query's and keys' input
//              gradients in the backward.
//   lstm       h / t hidden units of every gate: each time step all-gathers the new hidden
//              state (the recurrent GEMM needs all of it); the backward all-reduces the
//              hidden state's gradient every step, then the input gradient.
//   pool       runs whole on every rank (no parameters, no collective).
std::shared_ptr<const TensorSplit> shape_tensor_split(const ShapeOp& op, const ShapeState& input,
                                                      LinearSplit split, const Training& training,
                                                      const GpuSpec& gpu);

// The input of a shape-described model, for one micro-batch.
int64_t shape_input_bytes(const TensorShape& input, const Training& training);

}  // namespace pipesim
