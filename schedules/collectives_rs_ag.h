// Ring reduce-scatter and all-gather as transfers, the halves of a ring all-reduce that
// Megatron-LM's sequence parallelism and DeepSpeed's ZeRO issue on their own:
//
//   reduce-scatter  n - 1 steps; in each, every member sends bytes / n to the next and adds
//                   what it receives to its shard. Afterwards member i holds 1/n of the sum.
//   all-gather      n - 1 steps; in each, every member forwards bytes / n (the shard it got
//                   last) to the next. Afterwards every member holds all n shards.
//
// On idle links each costs (n - 1)(alpha + bytes / (n beta)), half a ring all-reduce; a
// reduce-scatter followed by an all-gather moves exactly what the all-reduce moves.
// `kHierarchical` (members spread evenly over several nodes, more than one on each) runs
// the half inside each node and the half across nodes on one ring per local rank, as the
// hierarchical all-reduce does (collectives.h); any other algorithm runs the plain ring.
#pragma once

#include <vector>

#include "schedules/collectives.h"

namespace pipesim {

// `bytes` is the whole buffer (what an all-reduce of it would take). Members are in ring
// order; each member's first send waits for its `ready` ops and its `done` op (if any) for
// the last transfer into it. Returns, per member, the transfers whose end means it holds its
// result, as add_allreduce does.
std::vector<std::vector<OpId>> add_reduce_scatter(TaskGraphBuilder& b,
                                                  const std::vector<CollectiveMember>& members,
                                                  int64_t bytes, CollectiveTag tag,
                                                  AllReduceAlgo algo = AllReduceAlgo::kRing,
                                                  const CopyImages& images = {});
std::vector<std::vector<OpId>> add_all_gather(TaskGraphBuilder& b,
                                              const std::vector<CollectiveMember>& members,
                                              int64_t bytes, CollectiveTag tag,
                                              AllReduceAlgo algo = AllReduceAlgo::kRing,
                                              const CopyImages& images = {});

}  // namespace pipesim
