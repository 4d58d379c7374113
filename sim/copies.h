// Identical copies simulated once (SimOptions::fold). A graph built from K data-parallel
// copies (TaskGraph::copies) whose copies are the same ops on the same kind of links is
// symmetric under the map that sends copy c to copy c + 1 (mod K): the whole run is, so
// every op of copy k starts and ends when its counterpart in copy 0 does, every device of
// copy k peaks when its counterpart does, and every link carries what its image does. The
// engine then simulates copy 0 alone:
//
// - Its links stand for their orbits under the map. A link that o of the K copies' images
//   fall on (o divides K) carries K / o of the full run's flows for each of copy 0's, so
//   copy 0's flows see it at 1 / (K / o) of its bandwidth (max-min sharing among K / o
//   identical flows is one flow on a link of that share), and their routes name each
//   orbit by one representative link.
// - A ring that spans the copies (the gradient all-reduce over the data-parallel group,
//   r members in each copy) runs its first r members: member r - 1 sends to member r's
//   GPU, and member 0 receives what member r - 1 sends, as it would from member n - 1,
//   its image.
// - After the run, copy k's ops, devices and links take copy 0's figures (expand).
//
// fold_copies checks all of this on the graph and the cluster and says nothing where any
// of it fails (a straggler, a GPU of another kind, an uneven placement, a collective
// whose members do not rotate with the copies, links that are not images of each other):
// there the engine simulates every copy.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "core/error.h"
#include "schedules/lower.h"
#include "schedules/task_graph.h"
#include "topology/cluster.h"

namespace pipesim {

struct Timeline;

struct CopyFold {
  int copies = 1;
  // [copy][i]: the ops of each copy in graph order; ops[k][i] is the image of ops[0][i].
  std::vector<std::vector<OpId>> ops;
  std::vector<char> simulated;  // [op] copy 0's
  std::vector<int32_t> device_copy;  // [device] its copy, -1 for none
  // [copy x per_copy + i]: device i of each copy, that of copy k the image of copy 0's.
  std::vector<int32_t> devices;
  size_t per_copy = 0;
  // [link direction]: the representative of its orbit (-1 where no flow crosses it) and
  // how many of the full run's flows each of copy 0's stands for there (K / orbit size).
  std::vector<LinkDirection> rep;
  std::vector<int32_t> share;  // empty: 1 on every link (a move of whole nodes), share_of
  int32_t share_of(LinkDirection l) const {
    return share.empty() ? 1 : share[static_cast<size_t>(l)];
  }
  // The orbits numbered in the order of their representatives: [link direction] its
  // orbit's number (-1 where rep is), [orbit] its representative. The engine's flows cross
  // orbits, one table entry each, not every link of the cluster.
  std::vector<int32_t> orbit;
  std::vector<LinkDirection> orbit_rep;
  // [ring]: the members copy 0 holds (its n unless the ring spans the copies).
  std::vector<uint32_t> members;
  // The lowest device among d and its images (the out-of-memory tie rule): looked up
  // only where memory crosses a capacity, so O(copies) each time and no table a device.
  int lowest_image(int d) const;
};

// Copies of the graph taken one at a time, else as few at a time as make the fold hold (two
// copies to a node of a cluster whose NICs serve nodes: copies 0 and 1 move onto 2 and 3):
// fold_groups' sizes, powers of two up to kFoldLargestGroup that divide the copies.
inline constexpr int kFoldLargestGroup = 32;
std::vector<int> fold_groups(int copies);
std::optional<CopyFold> fold_copies(const TaskGraph& graph, const Cluster& cluster);

// A graph of every copy refused for its size because its copies do not fold (lower_folded,
// the planner's judge): the plan is too large to simulate, not a wrong input.
class CopiesDoNotFold : public InputError {
 public:
  using InputError::InputError;
};

// The graph of `in` with its copies left implicit, taken as few at a time as make the fold
// hold (LoweringInput::built_copies, may_build_copies), or in full where none does: what
// the engine alone runs, at the cost of one group of copies instead of all. Where no group
// folds and every copy's graph would hold more than `max_full_ops` ops, CopiesDoNotFold
// says so before that graph is built (the planner's judge: a candidate too large to
// simulate costs its groups, not all its copies); a group whose share of
// `estimated_full_ops` is past the limit is not built either. The size is a built group's times the
// copies over the group; where no group may be built at all (a tree or hierarchical
// all-reduce, copies of different pace: may_build_copies), `estimated_full_ops`, the
// caller's estimate (0: none, then the graph is built).
TaskGraph lower_folded(LoweringInput in, const Cluster& cluster,
                       double max_full_ops = std::numeric_limits<double>::infinity(),
                       double estimated_full_ops = 0);

// Copy 0's figures onto every copy: op times, device statistics, link statistics (bytes
// and peak flows times the link's share), the out-of-memory device (the lowest image).
// Where the graph leaves copies implicit, their devices and links are left to
// Timeline::device and Timeline::link, which read them through the fold.
void expand(const std::shared_ptr<const CopyFold>& fold, Timeline& tl);

}  // namespace pipesim
