#include "schedules/collectives_a2a.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
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
                                              AllToAllRouting routing,
                                              const AllToAllImages& images) {
  const int n = static_cast<int>(members.size());
  const auto N = static_cast<size_t>(n);
  const auto built = [&](int i) {
    return images.built.empty() || images.built[static_cast<size_t>(i)] != 0;
  };
  std::vector<collective::Deps> incoming(members.size());
  if (n >= 2 && bytes > 0) {
    collective::Builder build(b, members, tag, CommKind::kAllToAll);
    const std::vector<collective::Deps> ready = collective::ready_of(members);
    // Members by node, nodes in order, and each member's node and index on it.
    std::map<int, std::vector<int>> by_node;
    std::vector<size_t> local(N);
    for (int i = 0; i < n; ++i) {
      auto& on = by_node[members[static_cast<size_t>(i)].node];
      local[static_cast<size_t>(i)] = on.size();
      on.push_back(i);
    }
    std::vector<const std::vector<int>*> nodes;
    std::vector<size_t> node_of(N);
    for (const auto& [node, on] : by_node) {
      for (const int i : on) node_of[static_cast<size_t>(i)] = nodes.size();
      nodes.push_back(&on);
    }
    // [i x n + j]: the transfer that brings member j what member i sends it (i built).
    std::vector<OpId> carries(images.built.empty() ? 0 : N * N, collective::kNone);
    const auto deliver = [&](int i, int j, OpId id) {
      if (built(j)) incoming[static_cast<size_t>(j)].push_back(id);
      if (!carries.empty()) carries[static_cast<size_t>(i) * N + static_cast<size_t>(j)] = id;
    };
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
      if (!built(i)) continue;
      const auto& deps = ready[static_cast<size_t>(i)];
      const size_t home = node_of[static_cast<size_t>(i)];
      for (const int j : *nodes[home]) {
        if (j != i) deliver(i, j, build.send(i, j, to(1), deps));
      }
      for (size_t k = 1; k < nodes.size(); ++k) {
        const std::vector<int>& on = *nodes[(home + k) % nodes.size()];
        const int peer = on[local[static_cast<size_t>(i)] % on.size()];
        const OpId sent = build.send(i, peer, to(static_cast<int64_t>(on.size())), deps);
        for (const int j : on) deliver(i, j, sent);
      }
    }
    // What implicit members send to built ones: their images' sends.
    for (int j = 0; j < n && !carries.empty(); ++j) {
      if (!built(j)) continue;
      for (int i = 0; i < n; ++i) {
        if (built(i) || i == j) continue;
        int from = i, into = j;
        for (int moves = 0; !built(from); ++moves) {
          PIPESIM_ASSERT(moves < n, "an all-to-all's implicit members are images of built ones");
          from = (from - images.shift % n + n) % n;
          into = (into - images.shift % n + n) % n;
        }
        const OpId id = carries[static_cast<size_t>(from) * N + static_cast<size_t>(into)];
        PIPESIM_ASSERT(id != collective::kNone, "a built member sends to every member");
        incoming[static_cast<size_t>(j)].push_back(id);
      }
      // (Images of two senders' transfers to one server can be one transfer.)
      auto& in = incoming[static_cast<size_t>(j)];
      std::sort(in.begin(), in.end());
      in.erase(std::unique(in.begin(), in.end()), in.end());
    }
  } else {
    incoming = collective::ready_of(members);
  }
  collective::wait_for_done(b, members, incoming);
  return incoming;
}

}  // namespace pipesim
