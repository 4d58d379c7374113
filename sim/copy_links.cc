// The links under the copies' fold (sim/internal/copy_map.h): orbits found by moving
// whole nodes where the cluster's nodes are interchangeable, else route by route.
#include <algorithm>
#include <unordered_set>

#include "sim/internal/copy_map.h"

namespace pipesim::folding {

// The (sender, receiver) pairs of the transfers among `ops`, each once.
DevicePairs transfer_pairs(const TaskGraph& g, const std::vector<OpId>& ops) {
  DevicePairs pairs;
  std::unordered_set<int64_t> known;
  for (const OpId a : ops) {
    const Op& op = g.op(a);
    if (op.kind != OpKind::kTransfer) continue;
    if (known.insert(int64_t{op.device} * g.num_devices() + op.peer).second)
      pairs.emplace_back(op.device, op.peer);
  }
  return pairs;
}

namespace {

// Copy 0's routes between `pairs`: none without latency, none crossing an orbit of f.rep
// twice (the fold counts one flow of copy 0's per orbit and route).
bool routes_cross_orbits_once(const Cluster& cluster, const DevicePairs& pairs,
                              const CopyFold& f) {
  for (const auto& [s, t] : pairs) {
    const Route& r = cluster.route(s, t);
    // Without latency a transfer can start in the very moment another ends on its link, and
    // which of the two the full run takes first is an order among copies the fold does not
    // keep (a link's peak flow count; as phases, sim/phases.h).
    if (r.latency == Time::zero()) return false;
    const auto& hops = r.hops;
    for (size_t i = 0; i < hops.size(); ++i) {
      if (f.rep[static_cast<size_t>(hops[i])] < 0) return false;
      for (size_t j = 0; j < i; ++j) {
        if (f.rep[static_cast<size_t>(hops[i])] == f.rep[static_cast<size_t>(hops[j])])
          return false;
      }
    }
  }
  return true;
}

// The orbits of a move of whole nodes numbered in the order of their representatives, the
// links of the nodes that are their orbit's lowest (`low`), as fold_by numbers them from
// f.rep: each node's inside links come before any node's fabric links, so taking those of
// every such node, then their fabric links, goes up. Sets f.orbit for the representatives
// (nodes_move writes the rest) and f.orbit_rep; leaves both empty where that order would
// not go up (fold_by then numbers them from f.rep).
void number_orbits(const Cluster& cluster, const std::vector<int32_t>& low, CopyFold& f) {
  f.orbit.assign(f.rep.size(), -1);
  f.orbit_rep.clear();
  for (size_t r = 0; r < 2; ++r) {
    for (size_t n = 0; n < low.size(); ++n) {
      if (low[n] != static_cast<int32_t>(n)) continue;
      const auto range = cluster.node_links(static_cast<int>(n))[r];
      for (LinkDirection h = 2 * range.first; h < 2 * range.second; ++h) {
        if (!f.orbit_rep.empty() && h <= f.orbit_rep.back()) {
          f.orbit.clear();
          f.orbit_rep.clear();
          return;
        }
        f.orbit[static_cast<size_t>(h)] = static_cast<int32_t>(f.orbit_rep.size());
        f.orbit_rep.push_back(h);
      }
    }
  }
}

// Moving one copy on as a move of whole nodes (Cluster::nodes_interchangeable): each device
// of copy c lands on the same GPU of its node as in copy c + 1, every node of the copies
// holds one copy's devices and goes to one node of the next, and K moves bring it back.
// Such a move maps the cluster onto itself, routes onto routes (checked on copy 0's), so
// the orbits are the copies' nodes' links K at a time, one flow of copy 0's for one of the
// full run's (share 1), found without composing any image's route. Sets f.rep and f.share;
// false where the move is not of whole nodes (links_match then looks route by route).
bool nodes_move(const Cluster& cluster, const DeviceMap& m, const DevicePairs& pairs,
                CopyFold& f) {
  if (!cluster.nodes_interchangeable()) return false;
  const int K = f.copies;
  const auto nodes = static_cast<size_t>(cluster.num_nodes());
  const int per_node = cluster.num_devices() / cluster.num_nodes();
  std::vector<int32_t> next(nodes, -1), prev(nodes, -1), copy_of(nodes, -1);
  const auto& node_of = cluster.device_nodes();
  for (int c = 0; c < K; ++c) {
    const int c1 = c + 1 == K ? 0 : c + 1;
    for (size_t i = 0; i < m.size(); ++i) {
      // (Interchangeable nodes hold per_node GPUs each, numbered node by node.)
      const int d = m.device(c, i), e = m.device(c1, i);
      const int nd = node_of[static_cast<size_t>(d)], ne = node_of[static_cast<size_t>(e)];
      const auto ndu = static_cast<size_t>(nd), neu = static_cast<size_t>(ne);
      if (d - nd * per_node != e - ne * per_node) return false;
      if (copy_of[ndu] != -1 && copy_of[ndu] != c) return false;
      copy_of[ndu] = c;
      if ((next[ndu] != -1 && next[ndu] != ne) || (prev[neu] != -1 && prev[neu] != nd))
        return false;
      next[ndu] = ne;
      prev[neu] = nd;
    }
  }
  // Each orbit of nodes, named by its lowest (whose links are the representatives).
  std::vector<int32_t> low(nodes, -1);
  for (size_t n = 0; n < nodes; ++n) {
    if (copy_of[n] != 0) continue;
    auto x = static_cast<int32_t>(n), least = x;
    for (int k = 0; k < K; ++k) {
      x = next[static_cast<size_t>(x)];
      least = std::min(least, x);
    }
    if (x != static_cast<int32_t>(n)) return false;
    for (int k = 0; k < K; ++k, x = next[static_cast<size_t>(x)]) low[static_cast<size_t>(x)] = least;
  }
  const auto L = static_cast<size_t>(cluster.num_links()) * 2;
  f.rep.assign(L, -1);
  f.share.clear();  // (one flow of copy 0's for one of the full run's on every link)
  number_orbits(cluster, low, f);
  for (size_t n = 0; n < nodes; ++n) {
    if (low[n] < 0) continue;
    const auto own = cluster.node_links(static_cast<int>(n));
    const auto rep = cluster.node_links(low[n]);
    for (size_t r = 0; r < own.size(); ++r) {
      for (int i = 0; i < own[r].second - own[r].first; ++i) {
        const auto h = static_cast<size_t>(2 * (own[r].first + i));
        const LinkDirection to = 2 * (rep[r].first + i);
        f.rep[h] = to;
        f.rep[h + 1] = to + 1;
        if (!f.orbit.empty()) {
          f.orbit[h] = f.orbit[static_cast<size_t>(to)];
          f.orbit[h + 1] = f.orbit[static_cast<size_t>(to) + 1];
        }
      }
    }
  }
  // The move on copy 0's routes: copy 1's are their images, hop by hop.
  std::vector<LinkDirection> moved;
  for (const auto& [s, t] : pairs) {
    const auto& hops = cluster.route(s, t).hops;
    cluster.route_hops(m.image(s, 1), m.image(t, 1), moved);
    if (moved.size() != hops.size()) return false;
    for (size_t j = 0; j < hops.size(); ++j) {
      const LinkDirection h = hops[j];
      if (moved[j] != cluster.moved_link(h, next[static_cast<size_t>(cluster.link_node(h))]))
        return false;
    }
  }
  return true;
}

}  // namespace

bool links_match(const Cluster& cluster, const DeviceMap& m, const DevicePairs& pairs,
                 CopyFold& f) {
  if (nodes_move(cluster, m, pairs, f)) return routes_cross_orbits_once(cluster, pairs, f);
  const int K = f.copies;
  const auto L = static_cast<size_t>(cluster.num_links()) * 2;
  std::vector<LinkDirection> next(L, -1), prev(L, -1);
  // What a hop adds to a route: its link's bandwidth and latency, and the latency of the
  // vertex it leaves (a switch's, counted from the second hop on). Hops that match in all
  // three make routes of one latency and bottleneck.
  struct Hop {
    double bandwidth;
    Time latency, leaving;
    bool operator==(const Hop&) const = default;
  };
  std::vector<Hop> hop(L);
  for (size_t d = 0; d < L; ++d) {
    const auto dir = static_cast<LinkDirection>(d);
    hop[d] = {cluster.direction_bandwidth(dir), cluster.link(dir / 2).spec.latency,
              cluster.leaving_latency(dir)};
  }
  std::vector<LinkDirection> at, to;  // (the images' routes are looked at once, not kept)
  for (const auto& [s, t] : pairs) {
    // Without latency a transfer can start in the very moment another ends on its link, and
    // which of the two the full run takes first is an order among copies the fold does not
    // keep (a link's peak flow count; as phases, sim/phases.h).
    if (cluster.route(s, t).latency == Time::zero()) return false;
    cluster.route_hops(s, t, at);
    for (int k = 0; k < K; ++k) {
      const int kn = (k + 1) % K;
      cluster.route_hops(m.image(s, kn), m.image(t, kn), to);
      if (to.size() != at.size()) return false;
      for (size_t j = 0; j < to.size(); ++j) {
        const LinkDirection a = at[j], b = to[j];
        auto& na = next[static_cast<size_t>(a)];
        auto& pb = prev[static_cast<size_t>(b)];
        if (na == -1 && pb == -1) {
          na = b;
          pb = a;
        } else if (na != b || pb != a) {
          return false;
        }
        const Hop &ha = hop[static_cast<size_t>(a)], &hb = hop[static_cast<size_t>(b)];
        if (ha.bandwidth != hb.bandwidth || ha.latency != hb.latency ||
            (j > 0 && ha.leaving != hb.leaving))
          return false;
      }
      std::swap(at, to);
    }
  }
  f.rep.assign(L, -1);
  f.share.assign(L, 1);
  f.orbit.clear();  // (numbered by fold_by from f.rep)
  f.orbit_rep.clear();
  for (size_t l = 0; l < L; ++l) {
    if (next[l] == -1 || f.rep[l] != -1) continue;
    auto x = static_cast<LinkDirection>(l), rep = x;
    int orbit = 0;
    do {
      rep = std::min(rep, x);
      x = next[static_cast<size_t>(x)];
      ++orbit;
    } while (x != static_cast<LinkDirection>(l) && x != -1 && orbit <= K);
    if (x != static_cast<LinkDirection>(l) || K % orbit != 0) return false;
    const int share = K / orbit;
    do {
      f.rep[static_cast<size_t>(x)] = rep;
      f.share[static_cast<size_t>(x)] = share;
      x = next[static_cast<size_t>(x)];
    } while (x != static_cast<LinkDirection>(l));
  }
  return routes_cross_orbits_once(cluster, pairs, f);
}

}  // namespace pipesim::folding
