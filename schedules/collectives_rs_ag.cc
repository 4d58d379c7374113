#include "schedules/collectives_rs_ag.h"

namespace pipesim {
namespace {

// n - 1 ring steps of ceil(bytes / n), each member's send waiting for what it received in
// the step before (its `ready` ops for the first).
std::vector<std::vector<OpId>> ring_pass(TaskGraphBuilder& b,
                                         const std::vector<CollectiveMember>& members,
                                         int64_t bytes, CollectiveTag tag, CommKind kind) {
  const size_t n = members.size();
  std::vector<std::vector<OpId>> incoming;
  for (const CollectiveMember& m : members) incoming.push_back(m.ready);
  if (n >= 2 && bytes > 0) {
    const auto parts = static_cast<int64_t>(n);
    const int64_t chunk = bytes / parts + (bytes % parts != 0);
    std::vector<OpId> sent(n);
    for (size_t step = 0; step + 1 < n; ++step) {
      for (size_t i = 0; i < n; ++i) {
        const size_t to = (i + 1) % n;
        sent[to] = b.add(transfer_op(members[i].device, members[to].device, chunk, kind, tag.stage,
                                     -1, tag.iteration));
        for (OpId d : incoming[i]) b.add_dep(sent[to], d);
      }
      for (size_t i = 0; i < n; ++i) incoming[i] = {sent[i]};
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (members[i].done == UINT32_MAX) continue;
    for (OpId d : incoming[i]) b.add_dep(members[i].done, d);
  }
  return incoming;
}

}  // namespace

std::vector<std::vector<OpId>> add_reduce_scatter(TaskGraphBuilder& b,
                                                  const std::vector<CollectiveMember>& members,
                                                  int64_t bytes, CollectiveTag tag) {
  return ring_pass(b, members, bytes, tag, CommKind::kReduceScatter);
}

std::vector<std::vector<OpId>> add_all_gather(TaskGraphBuilder& b,
                                              const std::vector<CollectiveMember>& members,
                                              int64_t bytes, CollectiveTag tag) {
  return ring_pass(b, members, bytes, tag, CommKind::kAllGather);
}

}  // namespace pipesim
