// The planner's estimate of tensor collectives under `tensor_overlap: full` with sequence
// parallelism, collective by collective (planner/cost_model.cc's stage_time).
#pragma once

#include <algorithm>

#include "schedules/model.h"

namespace pipesim::planner {

// One layer's tensor collectives under `tensor_overlap: full` with sequence parallelism,
// each half of an all-reduce beside the GEMM Transformer Engine pairs it with, as the
// lowering pairs them (schedules/stage_profiles.cc layer_pieces): in the forward the
// reduce-scatter beside the last 3/4 of the projection or fc2 and the all-gather beside the
// norm and GEMM it feeds; in the backward the all-gather beside the input gradients it feeds
// and the reduce-scatter beside its weight gradient (Layer::tp_backward_beside), unless a
// zero-bubble schedule defers W (then charged whole: the lowering runs it beside the input
// gradients before it, so this errs slow). What each leaves past its window, in seconds for
// one rank (the pieces are the whole layer's, t x cp ranks' shares; the layer's own times
// are already 1/cp). A layer without pieces runs its reduce-scatters beside its own
// compute, its all-gathers beside the next layer's lead like the other layers' (backward:
// its all-reduces beside its backward).
//
// The all-gather beside a layer's first lead is the previous layer's, so a pass over a
// range of layers has none beside its first lead and ends with one beside nothing:
// `edge_forward` (the range starts at this layer) and `edge_backward` (its backward starts
// at this layer) are what the pairing above hid that the pass does not.
// What a collective of c seconds leaves past compute of w beside it when that compute runs
// at 1 - slow of its speed meanwhile (GpuSpec::comm_interference, as the engine paces it):
// the pair takes max(c, w + slow c).
inline double left_past(double c, double w, double slow) {
  return std::max(c - w, slow * c);
}

struct FullOverlapLeft {
  double forward = 0, backward = 0, backward_split_w = 0;
  double edge_forward = 0, edge_backward = 0;
};
// `gather`, `scatter` (the backward's), `forward_scatter` and `allreduce`: each collective's
// time on the tensor group, in seconds (the fp8 ones already narrowed). `slow`: the share of
// its speed compute loses beside a collective (GpuSpec::comm_interference; 0 where the
// group leaves the server), which makes a collective leave max(c - w, slow c) past its
// window w.
FullOverlapLeft full_overlap_left(const Layer& x, int t, int cp, double gather, double scatter,
                                  double forward_scatter, double allreduce, double slow = 0);

}  // namespace pipesim::planner
