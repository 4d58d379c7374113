#include "planner/layer_comm.h"

#include <algorithm>

#include "schedules/collective_estimates.h"

namespace pipesim::planner {

LayerCommCosts::LayerCommCosts(const Scenario& s, int tensor, int context, int expert,
                               int expert_tensor)
    : s_(s),
      t_(std::max(1, tensor)),
      context_(std::max(1, context)),
      expert_(expert),
      etp_(std::max(1, expert_tensor)),
      per_node_(s.cluster.gpus_of_node(0)) {
  // Communication slowing compute (GpuSpec::comm_interference x, as the engine paces it):
  // compute beside a collective of its tensor group inside a server runs at 1 - x of its
  // speed (device 0's x, as every estimate prices device 0).
  slow_ = t_ <= per_node_ && s.strategy.tensor_overlap != TensorOverlap::kNone
              ? s.cluster.device(0).gpu.comm_interference
              : 0.0;
}

// 2(n - 1) steps of bytes / n, each on the route between two of the server's GPUs: the
// tensor group's, and an expert-tensor group's all-gather and reduce-scatter together.
double LayerCommCosts::ring_allreduce(int n, int64_t bytes, double shards) const {
  if (n < 2 || bytes <= 0 || s_.cluster.num_devices() < 2) return 0.0;
  const Route& r = s_.cluster.route(0, 1);
  GroupShape ring;
  ring.n = n;
  return alpha_beta_allreduce(AllReduceAlgo::kRing, ring, bytes, 1, [&](StepEdges, int64_t chunk) {
    return shards * r.latency.seconds() + static_cast<double>(chunk) / r.bottleneck_bytes_per_s;
  });
}

double LayerCommCosts::all_to_all(int64_t bytes, double shards) const {
  if (expert_ < 2 || bytes <= 0 || s_.cluster.num_devices() < 2) return 0.0;
  const int span = expert_ * t_;
  const bool across = span > per_node_ && s_.cluster.num_devices() > per_node_;
  const Route& r = s_.cluster.route(0, across ? per_node_ : 1);
  const double away =
      across ? 1.0 - static_cast<double>(per_node_) / span : (expert_ - 1.0) / expert_;
  return shards * r.latency.seconds() +
         static_cast<double>(bytes) * away / r.bottleneck_bytes_per_s;
}

LayerComm LayerCommCosts::of(const Layer& x, double shards) const {
  LayerComm c;
  // Per pass: the dispatch and the combine, and under expert tensor parallelism the
  // gathered tokens' all-gather and reduce-scatter.
  const int64_t tokens = x.moe ? x.moe->dispatch_bytes / (int64_t{t_} * context_) : 0;
  c.all_to_all =
      x.moe ? 2 * all_to_all(tokens, shards) + ring_allreduce(etp_, tokens * etp_, shards) : 0;
  const double ar = ring_allreduce(t_, x.tp_allreduce_bytes, shards);
  c.forward = x.tp_forward_allreduces * ar + c.all_to_all;
  c.allreduce = ar;
  c.gather = x.tp_fp8 ? ring_allreduce(t_, x.tp_allreduce_bytes / 2, shards) / 2 : ar / 2;
  c.backward = x.tp_backward_allreduces * ar + c.all_to_all;
  // With the backward's overlap: what each all-reduce leaves past its dW GEMM (one rank's
  // share; replicas shorten both alike: CostModel::stage_time).
  for (int q = 0; q < x.tp_backward_allreduces; ++q) {
    const auto k = static_cast<size_t>(q);
    const double dw =
        k < x.tp_backward_beside.size() ? x.tp_backward_beside[k].seconds() / (t_ * context_) : 0.0;
    c.beside += left_past(ar, dw, slow_);
    c.beside_sp += left_past(ar / 2, dw, slow_) + ar / 2;
  }
  c.beside += c.all_to_all;
  c.beside_sp += c.all_to_all;
  if (x.tensor_parallel && t_ > 1 && x.tp_allreduce_bytes > 0) {
    // (Under fp8 the all-gathers, and under `full` the forward's reduce-scatters, move one
    // byte an element: Layer::tp_fp8.)
    const int64_t narrow = x.tp_fp8 ? x.tp_allreduce_bytes / 2 : x.tp_allreduce_bytes;
    const double gather = ring_allreduce(t_, narrow, shards) / 2, scatter = ar / 2;
    c.full = full_overlap_left(x, t_, context_, gather, scatter, gather, 2 * scatter, slow_);
  }
  return c;
}

}  // namespace pipesim::planner
