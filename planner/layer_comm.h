// The collectives one layer issues on its tensor, expert and expert-tensor groups, as the
// planner's estimate charges them per micro-batch (planner/cost_model.h sums them layer by
// layer; stage_time picks the terms the plan's overlap and schedule call for).
#pragma once

#include <cstdint>

#include "planner/full_overlap.h"
#include "scenario/scenario.h"

namespace pipesim::planner {

// One layer's terms, seconds for one rank at the whole micro-batch (replicas divide them).
struct LayerComm {
  double forward = 0, backward = 0;  // on the critical path: every collective exposed
  // Under `tensor_overlap: backward`: what the input-gradient all-reduces leave past the dW
  // GEMMs they run beside; `beside_sp`: with sequence parallelism (the reduce-scatter half
  // beside dW, the all-gather after both: Lowering::add_tensor_collectives).
  double beside = 0, beside_sp = 0;
  double all_to_all = 0;  // a MoE layer's dispatch and combine (and expert-tensor gathers)
  // One tensor all-reduce of the layer's activation, and one sequence-parallel all-gather
  // of it (in fp8 where the layer gathers in fp8: Layer::tp_fp8).
  double allreduce = 0, gather = 0;
  FullOverlapLeft full;   // under `full` with sequence parallelism (each term without a2a)
};

// What a selective recompute issues again in one layer (RecomputePart): tensor all-reduces,
// the per-op policy's gathers (all-reduces without sequence parallelism), and whether it
// exchanges the MoE block's tokens again.
struct LayerRerun {
  int allreduces = 0, gathers = 0;
  bool exchanges = false;
  int forward = 0;  // the layer's forward all-reduces (Layer::tp_forward_allreduces)
};

class LayerCommCosts {
 public:
  // Groups of `tensor` GPUs inside server 0 (on the route between its first two GPUs),
  // ranks of `context` sharing the tokens, `expert` x `expert_tensor` sharing the experts.
  LayerCommCosts(const Scenario& s, int tensor, int context, int expert, int expert_tensor);
  // `x`: the layer as the tensor group's ranks cost it (Layer::at_degrees), its times
  // and activation bytes already 1/context. `shards`: the collectives of the replicas
  // splitting the micro-batch, added up: all move the micro-batch's bytes, and the latency
  // is paid `shards` times, the split (CostModel::split) for the slowest replica's once
  // (b / ceil(b / r) where r replicas do not divide b samples).
  LayerComm of(const Layer& x, double shards = 1) const;
  // Device 0's comm_interference where the tensor group sits in a server and overlaps its
  // collectives, else 0 (left_past's `slow`).
  double slow() const { return slow_; }

 private:
  // A ring all-reduce on n GPUs inside one server (alpha_beta_allreduce's ring), each
  // step's latency paid `shards` times (of()'s shards).
  double ring_allreduce(int n, int64_t bytes, double shards = 1) const;
  // A MoE dispatch or combine of `bytes` from each GPU: (EP - 1)/EP of them away, over the
  // network where the group outgrows a server (one rail port).
  double all_to_all(int64_t bytes, double shards = 1) const;
  const Scenario& s_;
  int t_ = 1, context_ = 1, expert_ = 1, etp_ = 1, per_node_ = 1;
  double slow_ = 0;
};

}  // namespace pipesim::planner
