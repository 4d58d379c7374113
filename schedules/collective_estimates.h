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
// The network is seen through two functions, so this folder needs no cluster type: the time
// of a transfer between two devices on their idle route, and each device's server.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/time.h"
#include "schedules/collectives.h"

namespace pipesim {

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
