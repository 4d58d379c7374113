// Collectives as transfers: an all-reduce becomes the point-to-point transfers NCCL's
// algorithms perform, so the network model shares links between them and the pipeline's
// own traffic exactly where they meet.
//
//   ring          reduce-scatter + all-gather around a ring: 2(n - 1) steps, each member
//                 sending bytes / n to the next; on idle links
//                 2(n - 1)(alpha + bytes / (n beta)).
//   tree          NCCL's double binary tree: two binary trees (the second mirrored, so a
//                 member is interior in at most one) each reduce half the data up to their
//                 root and broadcast it back down, pipelined in tree_chunks(bytes) chunks.
//   hierarchical  reduce-scatter inside each node, a ring all-reduce of each shard across
//                 nodes (one ring per local rank), all-gather inside each node. Needs the
//                 same number of members on every node; otherwise it runs as a ring.
#pragma once

#include <string_view>
#include <vector>

#include "core/checked.h"
#include "schedules/task_graph.h"

namespace pipesim {

enum class AllReduceAlgo { kRing, kTree, kHierarchical };
std::string_view to_string(AllReduceAlgo a);

// Pipelining depth of the tree: chunks of at least 4 MiB per tree, at most kMaxTreeChunks
// of them. NCCL pipelines a tree in many chunks, so a large message pays the tree's depth
// in chunk times only a few times over (2D + K - 1 chunk times for K chunks, D levels).
inline constexpr int kMaxTreeChunks = 16;
inline int tree_chunks(int64_t bytes) {
  const int64_t k = ceil_div(ceil_div(bytes, 2), int64_t{4} << 20);
  return static_cast<int>(k < 1 ? 1 : (k > kMaxTreeChunks ? kMaxTreeChunks : k));
}

// Each all-reduce algorithm as the steps its slowest edge takes on idle links: `count`
// transfers of `chunk` bytes one after another, count x (alpha + chunk / beta) in the
// alpha-beta form. allreduce_estimate (the lowering's choice of algorithm) and the planner's
// network costs both cost an algorithm from these, each with its own view of the links.
struct CollectiveSteps {
  int64_t count = 0;
  int64_t chunk = 0;
};
// A ring reduce-scatter or all-gather among n: n - 1 steps of bytes / n to the next member.
inline CollectiveSteps ring_pass_steps(int64_t n, int64_t bytes) {
  return {n - 1, ceil_div(bytes, n)};
}
// A ring all-reduce: the reduce-scatter, then the all-gather.
inline CollectiveSteps ring_allreduce_steps(int64_t n, int64_t bytes) {
  return {2 * (n - 1), ceil_div(bytes, n)};
}
// Levels below the root of a heap-shaped binary tree of n members.
inline int64_t tree_depth(int64_t n) {
  int64_t depth = 0;
  while ((int64_t{1} << (depth + 1)) <= n) ++depth;
  return depth;
}
// Two trees of depth D, each pipelining K = tree_chunks(bytes) chunks of bytes / (2 K) up
// and down; a member's edges carry both trees' chunks.
inline CollectiveSteps tree_allreduce_steps(int64_t n, int64_t bytes) {
  const int64_t k = tree_chunks(bytes);
  return {2 * (tree_depth(n) + k - 1), checked_mul(2, ceil_div(bytes, 2 * k), "a tree's chunk")};
}
// The hierarchical all-reduce's ring across `servers` servers of `local` members each (one
// ring per local rank, each over bytes / local); inside the servers it is two ring passes.
inline CollectiveSteps hierarchical_across_steps(int64_t servers, int64_t local, int64_t bytes) {
  return {2 * (servers - 1), ceil_div(bytes, local * servers)};
}

struct CollectiveMember {
  int device = -1;
  int node = 0;
  std::vector<OpId> ready;  // the member's data is ready when these ops end
  OpId done = UINT32_MAX;   // this op waits for the member's result (none: nobody)
};

struct CollectiveTag {
  int stage = -1;
  int iteration = 0;
};

// A collective among copies the graph leaves implicit (TaskGraph::built_copies): the
// members given are the built copies' share of `copies` such groups, and a ring that spans
// the copies runs over all of them (its members x copies), its last member given sending
// to the image of its first in the next group: next[i] is member i's image there. Ring
// and hierarchical collectives with compact rings only; a hierarchical one's members must
// fill whole servers (may_build_copies), so its rings inside a server close among the
// members given and only its rings across the servers span the copies.
struct CopyImages {
  int copies = 1;
  std::vector<int> next;  // [member] the GPU holding what it holds in the next group
};

// Returns, per member, the transfers whose end means the member holds the result (what a
// following collective on the same members should wait for).
std::vector<std::vector<OpId>> add_allreduce(TaskGraphBuilder& b, AllReduceAlgo algo,
                                             const std::vector<CollectiveMember>& members,
                                             int64_t bytes, CollectiveTag tag,
                                             const CopyImages& images = {});

}  // namespace pipesim
