// The per-sample cost of one shape-described op, shared by costs/shapes.cc (whole layers)
// and costs/shape_shards.cc (one tensor rank's share). Internal to scenario/.
#pragma once

#include <string_view>
#include <vector>

#include "costs/roofline.h"
#include "costs/shapes.h"

namespace pipesim::internal {

// Per-sample costs of one op (floating point, exact for whole numbers below 2^53,
// checked before they become bytes).
struct ShapeCost {
  double flops = 0;
  double params = 0;
  double activation_elements = 0;  // precision-sized
  double activation_id_bytes = 0;  // token ids
  // The ops that time the layer, per sample (elements; bytes are counted in elements and
  // become bytes when the layer is built, except token ids which are 8 / element size).
  std::vector<OpSpec> ops;
  ShapeCost& operator+=(const ShapeCost& o) {
    flops += o.flops;
    params += o.params;
    activation_elements += o.activation_elements;
    activation_id_bytes += o.activation_id_bytes;
    ops.insert(ops.end(), o.ops.begin(), o.ops.end());
    return *this;
  }
};

// Applies `op` to `state` (the tensor shapes flowing through the model) and returns its cost.
// Throws InputError when the op does not fit the incoming shape.
ShapeCost apply_shape_op(const ShapeOp& op, ShapeState& state);

// An LSTM's ops per sample (elements) for `units` of its h hidden units' gates, over T steps
// of `in` input features in `dirs` directions.
std::vector<OpSpec> lstm_ops(double dirs, double T, double in, double h, double units);

// The ops of a cost, built per sample in elements, for one micro-batch of b samples.
std::vector<OpSpec> scaled_ops(const ShapeCost& c, double b, double elem);

// A byte or parameter count from its floating-point value; too large is an InputError.
int64_t to_whole(double v, std::string_view what);

}  // namespace pipesim::internal
