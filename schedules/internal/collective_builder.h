// The transfers of one collective among `members`: what add_allreduce, add_reduce_scatter
// and add_all_gather are made of. Every transfer carries `kind` and the collective's tag.
#pragma once

#include <vector>

#include "schedules/collectives.h"

namespace pipesim::collective {

constexpr OpId kNone = UINT32_MAX;
using Deps = std::vector<OpId>;

class Builder {
 public:
  Builder(TaskGraphBuilder& b, const std::vector<CollectiveMember>& m, CollectiveTag tag,
          CommKind kind, const CopyImages& images = {})
      : b_(b), m_(m), tag_(tag), kind_(kind), images_(images) {}

  // A transfer between members `from` and `to` (indices) after `deps` and `extra`, skipping
  // kNone.
  OpId send(int from, int to, int64_t bytes, const Deps& deps, OpId extra = kNone);
  // The same to a GPU outside the members (an image, CopyImages::next).
  OpId send_to(int from, int device, int64_t bytes, const Deps& deps, OpId extra = kNone);

  // `steps` rounds around the ring `ranks` (member indices), each member sending `chunk`
  // bytes to the next once it has received the previous round's. incoming[r] (indexed by
  // member) is what the member's first send waits for; on return, the last transfer into it
  // (with compact rings, the member's op of the CompactRing, which ends then). With images
  // (CopyImages) a ring that `spans` the copies runs over every copy's members, `ranks`
  // being the built ones; one that does not closes among `ranks` (a ring inside a server
  // whose members are all built).
  void ring(const std::vector<int>& ranks, int steps, int64_t chunk, std::vector<Deps>& incoming,
            bool spans = true);

  // NCCL's double binary tree over all members, pipelined in tree_chunks(bytes) chunks.
  void tree(int64_t bytes, std::vector<Deps>& incoming);

  // Members grouped by node, in order; empty if nodes hold different numbers of members.
  std::vector<std::vector<int>> by_node() const;

 private:
  TaskGraphBuilder& b_;
  const std::vector<CollectiveMember>& m_;
  CollectiveTag tag_;
  CommKind kind_;
  CopyImages images_;
};

// Each member's `ready` ops, the starting point of `incoming`.
std::vector<Deps> ready_of(const std::vector<CollectiveMember>& members);

// Makes each member's `done` op (if any) wait for its entries of `incoming`, skipping kNone.
void wait_for_done(TaskGraphBuilder& b, const std::vector<CollectiveMember>& members,
                   const std::vector<Deps>& incoming);

}  // namespace pipesim::collective
