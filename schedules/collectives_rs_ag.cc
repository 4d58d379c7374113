#include "schedules/collectives_rs_ag.h"

#include "schedules/internal/collective_builder.h"

namespace pipesim {
namespace {

// n - 1 ring steps of ceil(bytes / n), each member's send waiting for what it received in
// the step before (its `ready` ops for the first).
std::vector<std::vector<OpId>> ring_half(TaskGraphBuilder& b,
                                         const std::vector<CollectiveMember>& members,
                                         int64_t bytes, CollectiveTag tag, CommKind kind) {
  const int n = static_cast<int>(members.size());
  std::vector<collective::Deps> incoming = collective::ready_of(members);
  if (n >= 2 && bytes > 0) {
    std::vector<int> all(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
    collective::Builder(b, members, tag, kind).ring(all, n - 1, ceil_div(bytes, n), incoming);
  }
  collective::wait_for_done(b, members, incoming);
  return incoming;
}

}  // namespace

std::vector<std::vector<OpId>> add_reduce_scatter(TaskGraphBuilder& b,
                                                  const std::vector<CollectiveMember>& members,
                                                  int64_t bytes, CollectiveTag tag) {
  return ring_half(b, members, bytes, tag, CommKind::kReduceScatter);
}

std::vector<std::vector<OpId>> add_all_gather(TaskGraphBuilder& b,
                                              const std::vector<CollectiveMember>& members,
                                              int64_t bytes, CollectiveTag tag) {
  return ring_half(b, members, bytes, tag, CommKind::kAllGather);
}

}  // namespace pipesim
