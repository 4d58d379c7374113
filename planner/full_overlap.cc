#include "planner/full_overlap.h"

#include <algorithm>

namespace pipesim::planner {

FullOverlapLeft full_overlap_left(const Layer& x, int t, int cp, double gather, double scatter,
                                  double forward_scatter, double allreduce, double slow) {
  FullOverlapLeft r;
  double ranks = static_cast<double>(t) * cp;
  const auto left = [&](double c, Time window) {
    return left_past(c, window.seconds() / ranks, slow);
  };
  const auto hidden = [&](double c, Time window) { return c - left(c, window); };
  if (x.pieces.empty()) {
    ranks = t;
    r.forward = left(x.tp_forward_allreduces * forward_scatter, x.forward);
    r.edge_forward = x.tp_forward_allreduces > 0 ? gather : 0.0;  // (its gather left last)
    r.backward = left(x.tp_backward_allreduces * allreduce, x.backward());
    r.backward_split_w = left(x.tp_backward_allreduces * allreduce, x.backward_input);
    return r;
  }
  const std::vector<Time>& beside = x.tp_backward_beside;
  const auto scatter_beside = [&](Time w) {
    r.backward += left(scatter, w);
    r.backward_split_w += scatter;
  };
  for (const LayerPiece& p : x.pieces) {
    if (p.kind == PieceKind::kPreAttention) {
      r.forward += left(gather, p.lead_forward);
      r.edge_forward = hidden(gather, p.lead_forward);
      scatter_beside(beside.empty() ? Time{} : beside.back());
    }
    if (p.kind == PieceKind::kPostAttention || p.kind == PieceKind::kMlp) {
      r.forward += left(forward_scatter, p.tail_forward - p.tail_forward / 4);
      r.backward += left(gather, p.lead_backward);
      r.backward_split_w += left(gather, p.lead_backward);
      r.edge_backward = hidden(gather, p.lead_backward);  // (the last piece's: first back)
    }
    if (p.kind == PieceKind::kMlp) {
      r.forward += left(gather, p.lead_forward);
      scatter_beside(beside.size() > 1 ? beside.front() : Time{});
    }
  }
  return r;
}

}  // namespace pipesim::planner
