// Tensor parallelism of shape-described layers (costs/shapes.h, shape_tensor_split): one
// rank's share of each op from the sharded shapes, timed by the same per-op rooflines.
#include <utility>
#include <variant>

#include "core/error.h"
#include "costs/internal/shape_cost.h"
#include "costs/shapes.h"

namespace pipesim {
namespace {

using internal::apply_shape_op;
using internal::ShapeCost;
using Kind = TensorShape::Kind;

// One tensor rank's share of a layer, per sample in elements: its ops, its activations
// (split, and kept whole on every rank), and its collectives.
struct ShardCost {
  ShapeCost cost;
  double split = 0, replicated = 0;
  std::vector<std::pair<TpCollective::Kind, double>> forward, backward;
};

constexpr auto kAllReduce = TpCollective::Kind::kAllReduce;
constexpr auto kAllGather = TpCollective::Kind::kAllGather;

double shard_of(int64_t n, int t) {
  return static_cast<double>(n / t + (n % t != 0));  // the largest rank's share
}

struct Shard {
  const ShapeState& in;
  int t;
  LinearSplit split;

  ShardCost operator()(const LinearOp& op) const {
    const TensorShape& x = in.current;
    const bool seq = x.kind == Kind::kSequence;
    const double tokens = seq ? static_cast<double>(x.tokens) : 1;
    const double features = seq ? static_cast<double>(x.features) : x.elements();
    ShardCost r;
    ShapeState s = in;
    if (split == LinearSplit::kRow) {
      const double part = shard_of(static_cast<int64_t>(features), t);
      if (seq) {
        s.current.features = static_cast<int64_t>(part);
      } else {
        s.current = TensorShape{};
        s.current.features = static_cast<int64_t>(part);
      }
      r.cost = apply_shape_op(op, s);
      r.split = r.cost.activation_elements;
      r.forward.emplace_back(kAllReduce, tokens * static_cast<double>(op.out));
      return r;
    }
    LinearOp column = op;
    column.out = static_cast<int64_t>(shard_of(op.out, t));
    r.cost = apply_shape_op(column, s);
    r.replicated = r.cost.activation_elements;
    if (split == LinearSplit::kGather)
      r.forward.emplace_back(kAllGather, tokens * static_cast<double>(op.out));
    r.backward.emplace_back(kAllReduce, tokens * features);
    return r;
  }

  ShardCost operator()(const ConvOp& op) const {
    ShapeState whole = in, s = in;
    apply_shape_op(op, whole);
    ConvOp column = op;
    column.out = static_cast<int64_t>(shard_of(op.out, t));
    ShardCost r;
    r.cost = apply_shape_op(column, s);
    r.replicated = in.current.elements();  // the input; batch norm's input is split
    r.split = r.cost.activation_elements - r.replicated;
    r.forward.emplace_back(kAllGather, whole.current.elements());
    r.backward.emplace_back(kAllReduce, in.current.elements());
    return r;
  }

  ShardCost operator()(const PoolOp& op) const {
    ShapeState s = in;
    ShardCost r;
    r.cost = apply_shape_op(op, s);
    r.replicated = r.cost.activation_elements;
    return r;
  }

  ShardCost operator()(const AttentionOp& op) const {
    ShapeState s = in;
    const TensorShape& keys = in.carried.empty() ? in.current : in.carried.back();
    const int64_t a = op.hidden > 0 ? op.hidden : keys.features;
    AttentionOp part = op;
    part.hidden = static_cast<int64_t>(shard_of(a, t));
    ShardCost r;
    r.cost = apply_shape_op(part, s);
    const double T = static_cast<double>(in.current.tokens), Ts = static_cast<double>(keys.tokens);
    r.split = T * Ts * static_cast<double>(part.hidden);  // the tanh of the scores
    r.replicated = r.cost.activation_elements - r.split;
    r.forward.emplace_back(kAllReduce, T * Ts);
    r.backward.emplace_back(kAllReduce, in.current.elements() + keys.elements());
    return r;
  }

  ShardCost operator()(const LstmOp& op) const {
    ShapeState s = in;
    apply_shape_op(op, s);  // checks the input's shape
    double input = static_cast<double>(in.current.features);
    if (op.context) input += static_cast<double>(in.carried.back().features);
    const double h = static_cast<double>(op.hidden), hr = shard_of(op.hidden, t);
    const double T = static_cast<double>(in.current.tokens), dirs = op.bidirectional ? 2 : 1;
    ShardCost r;
    r.cost.ops = internal::lstm_ops(dirs, T, input, h, hr);  // the recurrent GEMM reads all h
    // The input and the previous hidden state are whole; gates, cell state and its tanh split.
    r.replicated = dirs * T * (input + h);
    r.split = dirs * T * 6 * hr;
    const auto steps = static_cast<size_t>(in.current.tokens);
    r.forward.assign(steps, std::pair{kAllGather, dirs * h});
    r.backward.assign(steps, std::pair{kAllReduce, dirs * h});
    r.backward.emplace_back(kAllReduce, T * static_cast<double>(in.current.features));
    return r;
  }

  template <typename Op>
  ShardCost operator()(const Op&) const {
    PIPESIM_ASSERT(false, "only splittable ops get a tensor split");
    return {};
  }
};

bool splittable(const ShapeOp& op) {
  return std::holds_alternative<LinearOp>(op) || std::holds_alternative<ConvOp>(op) ||
         std::holds_alternative<PoolOp>(op) || std::holds_alternative<AttentionOp>(op) ||
         std::holds_alternative<LstmOp>(op);
}

}  // namespace

std::shared_ptr<const TensorSplit> shape_tensor_split(const ShapeOp& op, const ShapeState& input,
                                                      LinearSplit split, const Training& training,
                                                      const GpuSpec& gpu) {
  if (!splittable(op)) return nullptr;
  return std::make_shared<const TensorSplit>([op, input, split, training, gpu](int t, int k) {
    const ShardCost c = std::visit(Shard{input, t, split}, op);
    const double b = static_cast<double>(training.micro_batch);
    const double elem = static_cast<double>(element_bytes(training.precision));
    const Layer timed = timed_in_shards(internal::scaled_ops(c.cost, b, elem), k, training, gpu);
    TensorShard s;
    s.forward = timed.forward;
    s.backward_input = timed.backward_input;
    s.backward_weight = timed.backward_weight;
    s.split_activation = internal::to_whole(c.split * elem * b, "a layer's activations");
    s.replicated_activation = internal::to_whole(c.replicated * elem * b, "a layer's activations");
    for (const auto& [from, to] : {std::pair{&c.forward, &s.forward_collectives},
                                   std::pair{&c.backward, &s.backward_collectives}}) {
      for (const auto& [kind, elements] : *from)
        to->push_back({kind,
                       internal::to_whole(elements * elem * b, "a tensor-parallel collective"),
                       Time::zero()});
    }
    return s;
  });
}

}  // namespace pipesim
