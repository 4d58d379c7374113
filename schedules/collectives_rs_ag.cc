#include "schedules/collectives_rs_ag.h"

#include "core/error.h"
#include "schedules/internal/collective_builder.h"

namespace pipesim {
namespace {

// n - 1 ring steps of ceil(bytes / n), each member's send waiting for what it received in
// the step before (its `ready` ops for the first). Hierarchical, over N nodes of g members
// each: a reduce-scatter runs g - 1 steps of bytes / g inside each node, then N - 1 steps of
// bytes / (gN) around one ring per local rank across the nodes (each on its own GPU's
// network port); an all-gather runs the same two halves in the other order.
std::vector<std::vector<OpId>> ring_half(TaskGraphBuilder& b, AllReduceAlgo algo,
                                         const std::vector<CollectiveMember>& members,
                                         int64_t bytes, CollectiveTag tag, CommKind kind,
                                         const CopyImages& images) {
  const int n = static_cast<int>(members.size());
  const int total = n * images.copies;
  std::vector<collective::Deps> incoming = collective::ready_of(members);
  PIPESIM_ASSERT(images.copies == 1 || algo != AllReduceAlgo::kTree, "implicit copies in rings");
  if (total >= 2 && bytes > 0) {
    collective::Builder build(b, members, tag, kind, images);
    std::vector<std::vector<int>> nodes;
    if (algo == AllReduceAlgo::kHierarchical) nodes = build.by_node();
    // (The servers of the implicit copies too: those given are whole servers.)
    const auto N = static_cast<int64_t>(nodes.size()) * images.copies;
    if (N > 1 && nodes.front().size() > 1) {
      const auto g = static_cast<int64_t>(nodes.front().size());
      const auto inside = [&] {
        for (const auto& local : nodes)
          build.ring(local, static_cast<int>(g - 1), ceil_div(bytes, g), incoming, false);
      };
      const auto across = [&] {
        for (size_t l = 0; l < static_cast<size_t>(g); ++l) {
          std::vector<int> ring;
          for (const auto& local : nodes) ring.push_back(local[l]);
          build.ring(ring, static_cast<int>(N - 1), ceil_div(bytes, g * N), incoming);
        }
      };
      if (kind == CommKind::kAllGather) {
        across();
        inside();
      } else {
        inside();
        across();
      }
    } else {
      std::vector<int> all(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
      build.ring(all, total - 1, ceil_div(bytes, total), incoming);
    }
  }
  collective::wait_for_done(b, members, incoming);
  return incoming;
}

}  // namespace

std::vector<std::vector<OpId>> add_reduce_scatter(TaskGraphBuilder& b,
                                                  const std::vector<CollectiveMember>& members,
                                                  int64_t bytes, CollectiveTag tag,
                                                  AllReduceAlgo algo, const CopyImages& images) {
  return ring_half(b, algo, members, bytes, tag, CommKind::kReduceScatter, images);
}

std::vector<std::vector<OpId>> add_all_gather(TaskGraphBuilder& b,
                                              const std::vector<CollectiveMember>& members,
                                              int64_t bytes, CollectiveTag tag,
                                              AllReduceAlgo algo, const CopyImages& images) {
  return ring_half(b, algo, members, bytes, tag, CommKind::kAllGather, images);
}

}  // namespace pipesim
