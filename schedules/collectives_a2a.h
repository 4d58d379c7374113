// All-to-all as transfers: MoE token dispatch and combine among expert-parallel ranks, and
// Ulysses attention among context-parallel ranks.
//
// Each of n members holds `bytes` and sends bytes / n of it to every other member, all at
// once (NCCL's grouped sends and receives). Inside a node every pair is its own transfer;
// across nodes a member sends what it has for a whole remote node as one transfer, to the
// member there with its own local index (the rail peer: the GPU on its network port's
// rail, as NCCL's PXN routes it), which stands for the node's other members too. So a
// member sends (n - 1) bytes / n in all, over NVLink to its node and over its port to each
// other node, and on idle links the all-to-all takes about
//   alpha + max(local bytes / NVLink bandwidth, remote bytes / port bandwidth).
// Every member's `done` op waits for everything addressed to its node from elsewhere and to
// itself from its node.
#pragma once

#include <vector>

#include "schedules/collectives.h"

namespace pipesim {

//
// `routing` (a MoE dispatch or combine of tokens each routed to top_k of `experts`, spread
// evenly over the members): with top_k > 0 a token travels once to each GPU and each node
// holding any of its experts (DeepEP, HybridEP). `bytes` then counts every routed copy
// (tokens x top_k x hidden), and what goes to a GPU or node holding e of the experts is
// bytes / top_k x P(a token picks any of them) = bytes / top_k x (1 - C(E - e, k) / C(E, k))
// instead of bytes x e / E.
struct AllToAllRouting {
  int top_k = 0, experts = 0;
};
std::vector<std::vector<OpId>> add_all_to_all(TaskGraphBuilder& b,
                                              const std::vector<CollectiveMember>& members,
                                              int64_t bytes, CollectiveTag tag,
                                              AllToAllRouting routing = {});

}  // namespace pipesim
