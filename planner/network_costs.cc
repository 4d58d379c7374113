#include "planner/network_costs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>
#include <vector>

#include "schedules/collective_estimates.h"

namespace pipesim::planner {
namespace {
// Two non-negative ints, whole (device counts need not fit in 16 bits).
uint64_t pack(int a, int b) {
  return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
}
}  // namespace

NetworkCosts::NetworkCosts(const Scenario& s) : s_(s) {}

std::pair<double, double> NetworkCosts::cut_rate(int g0, int r0, int g1, int r1) const {
  const Key key{pack(g0, r0), pack(g1, r1), 0};
  if (auto it = cut_.find(key); it != cut_.end()) return it->second;
  std::vector<int> from, to;
  for (int i = 0; i < r0; ++i) from.push_back(g0 + i);
  for (int j = 0; j < r1; ++j) to.push_back(g1 + j);
  return cut_.emplace(key, cut_rate(from, to)).first->second;
}

// Seconds per link direction (Route::hops): a GPU's links, a server's network ports.
struct NetworkCosts::Loads {
  std::unordered_map<LinkDirection, double> on;
  double busiest() const {
    double most = 0;
    for (const auto& [k, v] : on) most = std::max(most, v);
    return most;
  }
};

double NetworkCosts::add_cut(const std::vector<int>& from, const std::vector<int>& to, double bytes,
                             Loads& loads, bool servers_only) const {
  // Replica i of r0 and j of r1 share overlap(i, j) / (r0 r1) of the micro-batch; each
  // pair's bytes load every link of its route.
  const Cluster& c = s_.cluster;
  const auto r0 = static_cast<int64_t>(from.size()), r1 = static_cast<int64_t>(to.size());
  double latency = 0;
  for (int64_t i = 0; i < r0; ++i) {
    // Only the j whose samples overlap i's: i r1 / r0 <= j < (i + 1) r1 / r0, rounded out.
    for (int64_t j = i * r1 / r0; j < std::min(r1, ((i + 1) * r1 + r0 - 1) / r0); ++j) {
      const int64_t lo = std::max(i * r1, j * r0), hi = std::min((i + 1) * r1, (j + 1) * r0);
      if (hi <= lo) continue;
      const double share = static_cast<double>(hi - lo) / (double(r0) * double(r1));
      const int a = from[static_cast<size_t>(i)], b = to[static_cast<size_t>(j)];
      if (a == b || a >= c.num_devices() || b >= c.num_devices()) continue;
      if (servers_only && c.device(a).node == c.device(b).node) continue;
      const Route& route = c.route(a, b);
      latency = std::max(latency, route.latency.seconds());
      for (const LinkDirection h : route.hops) {
        const double bw = c.direction_bandwidth(h);
        if (bw > 0 && std::isfinite(bw)) loads.on[h] += bytes * share / bw;
      }
    }
  }
  return latency;
}

std::pair<double, double> NetworkCosts::cut_rate(const std::vector<int>& from,
                                                 const std::vector<int>& to) const {
  auto key = std::make_pair(from, to);
  if (auto it = rows_.find(key); it != rows_.end()) return it->second;
  Loads loads;
  const double latency = add_cut(from, to, 1.0, loads);
  return rows_.emplace(std::move(key), std::make_pair(latency, loads.busiest())).first->second;
}

const std::vector<std::pair<LinkDirection, double>>& NetworkCosts::crossing(
    const std::vector<int>& from, const std::vector<int>& to) const {
  auto key = std::make_pair(from, to);
  auto it = crossing_.find(key);
  if (it != crossing_.end()) return it->second;
  // Only pairs on different servers: inside one, each GPU pair has its own links, shared
  // by no other cut but a device's own chunks, whose compute the block already counts.
  Loads loads;
  add_cut(from, to, 1.0, loads, true);
  add_cut(to, from, 1.0, loads, true);
  std::vector<std::pair<LinkDirection, double>> hops(loads.on.begin(), loads.on.end());
  std::sort(hops.begin(), hops.end());  // the same sums in the same order on every run
  return crossing_.emplace(std::move(key), std::move(hops)).first->second;
}

double NetworkCosts::cut_load(const std::vector<Cut>& cuts) const {
  Loads loads;
  for (const Cut& k : cuts)
    for (const auto& [hop, per_byte] : crossing(*k.from, *k.to))
      loads.on[hop] += per_byte * k.bytes;
  return loads.busiest();
}

// allreduce_estimate (schedules/collective_estimates.h) times a step from many transfers of
// the same size (a ring's: their mean, or the slowest serialization; a tree's: the
// slowest); those depend on a route only through its latency and bandwidth, so a group is
// kept as the few distinct (latency, bandwidth) pairs of each set of edges, each with how
// many edges have it, and costed for any size from them by the same formula
// (alpha_beta_allreduce; the same alpha-beta terms, to within a picosecond's rounding).
struct NetworkCosts::Group {
  struct Rate {
    double latency, per_byte;
    bool across_servers = false;  // the route leaves its server (through the server's NIC)
    int64_t edges = 1;            // how many of the set's edges have this rate
    bool same_route(const Rate& o) const {
      return latency == o.latency && per_byte == o.per_byte && across_servers == o.across_servers;
    }
  };
  GroupShape shape;
  int64_t ports = 1;  // a server's NICs
  std::vector<Rate> ring, tree, intra, across;

  // `share` copies of the collective run at once on neighbouring GPUs (the ranks of a
  // tensor group), so a step that leaves a server shares its NIC `share` ways.
  // A tree's step: its slowest edge. A ring's (`mean`): the edges' mean transfer time, or
  // the slowest serialization where that is longer.
  static double step(const std::vector<Rate>& rates, int64_t bytes, double share, bool mean) {
    double worst = 0, serial = 0, sum = 0;
    int64_t edges = 0;
    for (const Rate& r : rates) {
      const double ways = r.across_servers ? share : 1;
      const double wire = r.per_byte * double(bytes) * ways;
      worst = std::max(worst, r.latency + wire);
      serial = std::max(serial, wire);
      sum += double(r.edges) * (r.latency + wire);
      edges += r.edges;
    }
    return mean && edges > 0 ? std::max(serial, sum / double(edges)) : worst;
  }
  const std::vector<Rate>& rates(StepEdges e) const {
    switch (e) {
      case StepEdges::kTree:
        return tree;
      case StepEdges::kIntra:
        return intra;
      case StepEdges::kAcross:
        return across;
      case StepEdges::kRing:
        break;
    }
    return ring;
  }
  // `ports`: a server's network ports the hierarchical algorithm's rings spread over (1:
  // allreduce_estimate's terms, which the lowering chooses by).
  double time(AllReduceAlgo a, int64_t bytes, double share = 1, int64_t ports = 1) const {
    return alpha_beta_allreduce(a, shape, bytes, ports, [&](StepEdges e, int64_t chunk) {
      return step(rates(e), chunk, share, e != StepEdges::kTree);
    });
  }
};

namespace {
void add_rate(const Cluster& c, int a, int b, std::vector<NetworkCosts::Group::Rate>& out) {
  if (a == b) return;
  const Route& r = c.route(a, b);
  const NetworkCosts::Group::Rate x{
      r.latency.seconds(),
      std::isinf(r.bottleneck_bytes_per_s) ? 0.0 : 1.0 / r.bottleneck_bytes_per_s,
      c.device(a).node != c.device(b).node};
  const auto same = std::find_if(out.begin(), out.end(),
                                 [&x](const NetworkCosts::Group::Rate& y) { return y.same_route(x); });
  if (same == out.end())
    out.push_back(x);
  else
    ++same->edges;
}
void add_ring(const Cluster& c, const std::vector<int>& ring,
              std::vector<NetworkCosts::Group::Rate>& out) {
  for (size_t i = 0; i < ring.size(); ++i) add_rate(c, ring[i], ring[(i + 1) % ring.size()], out);
}
}  // namespace

double NetworkCosts::tensor_ways(int t) const {
  const int ports = s_.cluster.nics_per_node();
  return static_cast<double>((t + ports - 1) / ports);
}

NetworkCosts::NetworkCosts(NetworkCosts&&) noexcept = default;
NetworkCosts::~NetworkCosts() = default;

double NetworkCosts::allreduce(int g, int r, int data, int stride, int t, int64_t bytes, bool ring,
                               double share) const {
  if (r * data < 2 || bytes <= 0) return 0;
  // One copy: the stride places nothing.
  const Key key{pack(g, r), pack(data, data > 1 ? stride : 0), static_cast<uint64_t>(t)};
  auto it = groups_.find(key);
  if (it == groups_.end()) {
    // Rank 0 of every group (every rank's data-parallel group looks alike).
    std::vector<int> devices;
    for (int c = 0; c < data; ++c) {
      for (int i = 0; i < r; ++i) {
        const int d = (c * stride + g + i) * t;
        if (d < s_.cluster.num_devices()) devices.push_back(d);
      }
    }
    // Other shapes (another tensor degree, depth or offset) can name the same devices.
    it = groups_.emplace(key, &shared(devices)).first;
  }
  return cheapest(*it->second, bytes / t, ring, tensor_ways(t) * share);
}

double NetworkCosts::allreduce(const std::vector<int>& devices, int64_t bytes, bool ring,
                               double share) const {
  if (devices.size() < 2 || bytes <= 0) return 0;
  return cheapest(shared(devices), bytes, ring, share);
}

const NetworkCosts::Group& NetworkCosts::shared(const std::vector<int>& devices) const {
  auto it = placed_.find(devices);
  if (it == placed_.end()) it = placed_.emplace(devices, group(devices)).first;
  return *it->second;
}

std::unique_ptr<NetworkCosts::Group> NetworkCosts::group(const std::vector<int>& devices) const {
  const Cluster& cl = s_.cluster;
  auto grp = std::make_unique<Group>();
  grp->shape = group_shape(devices, [&cl](int d) { return cl.device(d).node; });
  grp->ports = cl.nics_per_node();
  add_ring(cl, devices, grp->ring);
  for (size_t pos = 1; pos < devices.size(); ++pos)
    add_rate(cl, devices[pos], devices[(pos - 1) / 2], grp->tree);
  if (grp->shape.hierarchical) {
    add_ring(cl, grp->shape.intra, grp->intra);
    add_ring(cl, grp->shape.across, grp->across);
  }
  return grp;
}

double NetworkCosts::cheapest(const Group& g, int64_t bytes, bool ring, double share) const {
  if (g.shape.n < 2) return 0;
  // The lowering's choice (schedules/collective_estimates.h's fastest_allreduce): the
  // scenario's, else the fastest all-reduce of the group alone.
  AllReduceAlgo chosen = AllReduceAlgo::kRing;
  double alone = std::numeric_limits<double>::infinity();
  for (AllReduceAlgo a :
       {AllReduceAlgo::kRing, AllReduceAlgo::kTree, AllReduceAlgo::kHierarchical}) {
    if (s_.strategy.allreduce && *s_.strategy.allreduce != a) continue;
    // Without even servers the hierarchical algorithm is the ring again.
    if (a == AllReduceAlgo::kHierarchical && !g.shape.hierarchical && !s_.strategy.allreduce)
      continue;
    const double t = g.time(a, bytes);  // as allreduce_estimate costs it
    if (t < alone) {
      alone = t;
      chosen = a;
    }
  }
  // ZeRO's reduce-scatter and all-gather are the ring's halves, or the hierarchical ones
  // where that is the choice (schedules/collectives_rs_ag.cc); a tree is not split so.
  if (ring && chosen == AllReduceAlgo::kTree) chosen = AllReduceAlgo::kRing;
  return g.time(chosen, bytes, share, g.ports);
}

}  // namespace pipesim::planner
