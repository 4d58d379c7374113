#include "schedules/collectives_a2a.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "schedules/internal/collective_builder.h"

namespace pipesim {

namespace {

// Of tokens each routed to k of E experts uniformly, the share that picks any of e given
// experts: 1 - C(E - e, k) / C(E, k).
double picks_any(int k, int E, int64_t e) {
  double none = 1;
  for (int i = 0; i < k; ++i)
    none *= std::max(0.0, static_cast<double>(E - e - i)) / static_cast<double>(E - i);
  return 1 - none;
}

}  // namespace

std::vector<std::vector<OpId>> add_all_to_all(TaskGraphBuilder& b,
                                              const std::vector<CollectiveMember>& members,
                                              int64_t bytes, CollectiveTag tag,
                                              AllToAllRouting routing) {
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
    // What a member sends to `count` members (one GPU, or one node's): their share of its
    // bytes, or under deduplicating routing its tokens that pick any of their experts.
    const bool dedup = routing.top_k > 0 && routing.experts >= n;
    const auto to = [&](int64_t count) {
      if (!dedup) return share * count;
      const double v = std::ceil(static_cast<double>(bytes) / routing.top_k *
                                 picks_any(routing.top_k, routing.experts,
                                           routing.experts / n * count));
      return static_cast<int64_t>(v);
    };
    for (int i = 0; i < n; ++i) {
      const auto& from = members[static_cast<size_t>(i)];
      for (const auto& [node, on] : nodes) {
        if (node == from.node) {
          for (const int j : on) {
            if (j == i) continue;
            incoming[static_cast<size_t>(j)].push_back(
                build.send(i, j, to(1), ready[static_cast<size_t>(i)]));
          }
          continue;
        }
        const int peer = on[local[static_cast<size_t>(i)] % on.size()];
        const OpId sent = build.send(i, peer, to(static_cast<int64_t>(on.size())),
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
