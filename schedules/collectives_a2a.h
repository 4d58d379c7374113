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
// An all-to-all among copies the graph leaves implicit (TaskGraph::built_copies): `members`
// are all n, and only those `built` have ops (ready and done); moving on one group of
// copies sends member i to member (i + shift) % n, its servers whole onto servers in their
// cyclic order (may_build_copies). The built members send to every member; what an
// implicit member sends to a built one is its image's send, `shift` places back as often
// as it takes to reach a built sender, which ends at the same moment. Empty: all built.
struct AllToAllImages {
  std::vector<char> built;
  int shift = 0;
};
// Each member sends to its own server's members, then to the other servers in cyclic order
// from its own, so that a member's sends are its image's moved a server on.
std::vector<std::vector<OpId>> add_all_to_all(TaskGraphBuilder& b,
                                              const std::vector<CollectiveMember>& members,
                                              int64_t bytes, CollectiveTag tag,
                                              AllToAllRouting routing = {},
                                              const AllToAllImages& images = {});

}  // namespace pipesim
