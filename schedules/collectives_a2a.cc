#include "schedules/collectives_a2a.h"

#include <map>

#include "schedules/internal/collective_builder.h"

namespace pipesim {

std::vector<std::vector<OpId>> add_all_to_all(TaskGraphBuilder& b,
                                              const std::vector<CollectiveMember>& members,
                                              int64_t bytes, CollectiveTag tag) {
  const int n = static_cast<int>(members.size());
  std::vector<collective::Deps> incoming(members.size());
  if (n >= 2 && bytes > 0) {
    collective::Builder build(b, members, tag, CommKind::kAllToAll);
    const std::vector<collective::Deps> ready = collective::ready_of(members);
    // Members by node, in order, and each member's index on its node.
    std::map<int, std::vector<int>> nodes;
    std::vector<size_t> local(members.size());
    for (int i = 0; i < n; ++i) {
      auto& on = nodes[members[static_cast<size_t>(i)].node];
      local[static_cast<size_t>(i)] = on.size();
      on.push_back(i);
    }
    const int64_t share = ceil_div(bytes, int64_t{n});
    for (int i = 0; i < n; ++i) {
      const auto& from = members[static_cast<size_t>(i)];
      for (const auto& [node, on] : nodes) {
        if (node == from.node) {
          for (const int j : on) {
            if (j == i) continue;
            incoming[static_cast<size_t>(j)].push_back(
                build.send(i, j, share, ready[static_cast<size_t>(i)]));
          }
          continue;
        }
        const int peer = on[local[static_cast<size_t>(i)] % on.size()];
        const OpId sent = build.send(i, peer,
                                     share * static_cast<int64_t>(on.size()),
                                     ready[static_cast<size_t>(i)]);
        for (const int j : on) incoming[static_cast<size_t>(j)].push_back(sent);
      }
    }
  } else {
    incoming = collective::ready_of(members);
  }
  collective::wait_for_done(b, members, incoming);
  return incoming;
}

}  // namespace pipesim
