#include "schedules/collective_estimates.h"

#include <map>

namespace pipesim {

GroupShape group_shape(const std::vector<int>& devices, const std::function<int(int)>& node) {
  GroupShape g;
  g.n = static_cast<int64_t>(devices.size());
  if (devices.empty()) return g;
  std::map<int, std::vector<int>> servers;
  for (int d : devices) servers[node(d)].push_back(d);
  g.servers = static_cast<int64_t>(servers.size());
  g.local = static_cast<int64_t>(servers.begin()->second.size());
  bool even = true;
  for (const auto& [server, local] : servers)
    even = even && static_cast<int64_t>(local.size()) == g.local;
  g.hierarchical = even && g.servers >= 2 && g.local >= 2;
  if (g.hierarchical) {
    g.intra = servers.begin()->second;
    for (const auto& [server, local] : servers) g.across.push_back(local.front());
  }
  return g;
}

namespace {
// One step of a pipelined ring in which every member of `ring` sends `chunk` bytes to the
// next. A member's next step waits for its predecessor's chunk, so the dependency chain
// goes round the ring: in the steady state a step takes the mean of the edges' transfer
// times (latency + chunk / bandwidth), or the slowest edge's serialization where that is
// longer (its link cannot carry more). Equal edges give each edge's transfer time; a ring
// with one long edge (a chain's wrap-around) pays its latency once a round, not every step.
Time slowest_step(const LinkCosts& links, const std::vector<int>& ring, int64_t chunk) {
  Time sum, serial;
  int64_t edges = 0;
  for (size_t i = 0; i < ring.size(); ++i) {
    const int a = ring[i], b = ring[(i + 1) % ring.size()];
    if (a == b) continue;
    const Time t = links.transfer(a, b, chunk);
    sum = checked_add(sum, t, "a collective estimate");
    serial = max(serial, t - links.transfer(a, b, 0));
    ++edges;
  }
  return edges == 0 ? Time::zero() : max(serial, Time::ps(ceil_div(sum.ps_count(), edges)));
}
// The same on the heap-shaped tree's edges.
Time slowest_tree_step(const LinkCosts& links, const std::vector<int>& devices, int64_t chunk) {
  Time worst;
  for (size_t pos = 1; pos < devices.size(); ++pos) {
    const int a = devices[pos], b = devices[(pos - 1) / 2];
    if (a != b) worst = max(worst, links.transfer(a, b, chunk));
  }
  return worst;
}
}  // namespace

Time ring_pass_estimate(const LinkCosts& links, const std::vector<int>& devices, int64_t bytes) {
  const auto n = static_cast<int64_t>(devices.size());
  if (n < 2 || bytes <= 0) return Time::zero();
  return steps_time(StepEdges::kRing, ring_pass_steps(n, bytes),
                    [&](StepEdges, int64_t chunk) { return slowest_step(links, devices, chunk); });
}

namespace {
Time estimate(const LinkCosts& links, const std::vector<int>& devices, const GroupShape& g,
              int64_t bytes, AllReduceAlgo algo) {
  return alpha_beta_allreduce(algo, g, bytes, 1, [&](StepEdges e, int64_t chunk) {
    switch (e) {
      case StepEdges::kTree:
        return slowest_tree_step(links, devices, chunk);
      case StepEdges::kIntra:
        return slowest_step(links, g.intra, chunk);
      case StepEdges::kAcross:
        return slowest_step(links, g.across, chunk);
      case StepEdges::kRing:
        break;
    }
    return slowest_step(links, devices, chunk);
  });
}
}  // namespace

Time allreduce_estimate(const LinkCosts& links, const std::vector<int>& devices, int64_t bytes,
                        AllReduceAlgo algo) {
  if (devices.size() < 2 || bytes <= 0) return Time::zero();
  return estimate(links, devices, group_shape(devices, links.node), bytes, algo);
}

AllReduceAlgo fastest_allreduce(const LinkCosts& links, const std::vector<int>& devices,
                                int64_t bytes) {
  if (devices.size() < 2 || bytes <= 0) return AllReduceAlgo::kRing;
  const GroupShape g = group_shape(devices, links.node);
  AllReduceAlgo out = AllReduceAlgo::kRing;
  Time best = Time::max();
  for (AllReduceAlgo a : {AllReduceAlgo::kRing, AllReduceAlgo::kTree, AllReduceAlgo::kHierarchical}) {
    const Time est = estimate(links, devices, g, bytes, a);
    if (est < best) {
      best = est;
      out = a;
    }
  }
  return out;
}

}  // namespace pipesim
