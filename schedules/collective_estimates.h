// Idle-link estimates of the collectives that schedules/collectives.h and
// schedules/collectives_rs_ag.h decompose into transfers, in the alpha-beta form each
// decomposition gives on links nothing else uses. Used to choose an all-reduce algorithm per
// gradient group (strategy.allreduce: auto) and by the planner's cost model.
//
// clang-format off
//   ring all-reduce  2(n - 1) steps of bytes / n to the next member:
//                    2(n - 1)(alpha + bytes / (n beta))
//   reduce-scatter,  (n - 1) steps of bytes / n to the next member:
//   all-gather       (n - 1)(alpha + bytes / (n beta))   (rings)
//   tree             two trees of depth D pipelining K = tree_chunks(bytes) chunks up and down
//   hierarchical     ring reduce-scatter in each node, ring all-reduce across nodes (one ring
//                    per local rank, sharing each node's links), all-gather in each node
// clang-format on
//
// A ring's step on unequal edges is their mean transfer time (the waits go round the ring),
// or its slowest edge's serialization where that is longer; a tree's, its slowest edge.
//
// Each algorithm's formula is written once, in alpha_beta_allreduce: the lowering (Time, from the
// routes' transfer times) and the planner (seconds, from its per-group step rates,
// planner/network_costs.cc) differ only in how they time one step on a set of edges.
//
// The network is seen through two functions, so this folder needs no cluster type: the time
// of a transfer between two devices on their idle route, and each device's server.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/checked.h"
#include "core/time.h"
#include "schedules/collectives.h"

namespace pipesim {

// The edges whose slowest transfer paces a step: the ring over every member, the heap-shaped
// tree (member pos to (pos - 1) / 2), the ring inside the first server, the ring over each
// server's first member.
enum class StepEdges { kRing, kTree, kIntra, kAcross };

// A group as the algorithms see it. The hierarchical algorithm needs `servers` >= 2 servers
// holding `local` >= 2 members each; without that it is the ring.
struct GroupShape {
  int64_t n = 0, local = 0, servers = 0;
  bool hierarchical = false;
  std::vector<int> intra;   // the first server's members, in order
  std::vector<int> across;  // each server's first member, servers in index order
};
GroupShape group_shape(const std::vector<int>& devices, const std::function<int(int)>& node);

namespace estimate_detail {
inline Time times(Time t, int64_t k) { return checked_mul(t, k, "a collective estimate"); }
inline double times(double t, int64_t k) { return t * static_cast<double>(k); }
inline Time plus(Time a, Time b) { return checked_add(a, b, "a collective estimate"); }
inline double plus(double a, double b) { return a + b; }
}  // namespace estimate_detail

// `steps` on the edges `e`: count times the step's time.
template <class Step>
auto steps_time(StepEdges e, CollectiveSteps steps, const Step& step) {
  return estimate_detail::times(step(e, steps.chunk), steps.count);
}

// The all-reduce `a` of `bytes` on a group of shape `g`, with `step(edges, chunk)` the time
// of one step in which every edge of `edges` carries `chunk` bytes (Time or seconds).
// `ports`: a server's network ports, over which the hierarchical algorithm's `local` rings
// across the servers spread (1: every ring through one port, as the lowering chooses by).
template <class Step>
auto alpha_beta_allreduce(AllReduceAlgo a, const GroupShape& g, int64_t bytes, int64_t ports,
                    const Step& step) {
  using estimate_detail::plus;
  using estimate_detail::times;
  if (a == AllReduceAlgo::kTree) return steps_time(StepEdges::kTree, tree_allreduce_steps(g.n, bytes), step);
  if (a == AllReduceAlgo::kHierarchical && g.hierarchical) {
    const auto intra = steps_time(StepEdges::kIntra, ring_pass_steps(g.local, bytes), step);
    CollectiveSteps across = hierarchical_across_steps(g.servers, g.local, bytes);
    // One ring per local rank across the servers, `ports` of them at a time side by side.
    across.chunk = checked_mul(across.chunk, ceil_div(g.local, ports < 1 ? 1 : ports),
                               "a collective estimate");
    return plus(times(intra, 2), steps_time(StepEdges::kAcross, across, step));
  }
  return steps_time(StepEdges::kRing, ring_allreduce_steps(g.n, bytes), step);
}

struct LinkCosts {
  std::function<Time(int from, int to, int64_t bytes)> transfer;
  std::function<int(int device)> node;
};

Time allreduce_estimate(const LinkCosts& links, const std::vector<int>& devices, int64_t bytes,
                        AllReduceAlgo algo);

// `strategy.allreduce: auto`'s rule: of ring, tree and hierarchical, the all-reduce with the
// least estimated time on idle links for that group and size (the first of equals).
AllReduceAlgo fastest_allreduce(const LinkCosts& links, const std::vector<int>& devices,
                                int64_t bytes);

// A ring reduce-scatter or all-gather of `bytes` (the whole buffer; each member holds or
// receives bytes / n of it) among `devices`, in ring order.
Time ring_pass_estimate(const LinkCosts& links, const std::vector<int>& devices, int64_t bytes);

}  // namespace pipesim
