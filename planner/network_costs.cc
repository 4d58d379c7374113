#include "planner/network_costs.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "scenario/setup.h"

namespace pipesim::planner {
namespace {
uint64_t pack(int a, int b, int c, int d) {
  const auto f = [](int v) { return static_cast<uint64_t>(static_cast<uint16_t>(v)); };
  return f(a) << 48 | f(b) << 32 | f(c) << 16 | f(d);
}
}  // namespace

NetworkCosts::NetworkCosts(const Scenario& s) : s_(s) {}

std::pair<double, double> NetworkCosts::cut_rate(int g0, int r0, int g1, int r1) const {
  const Key key{pack(g0, r0, g1, r1), 0};
  if (auto it = cut_.find(key); it != cut_.end()) return it->second;
  // Replica i of r0 and j of r1 share overlap(i, j) / (r0 r1) of the micro-batch. Bytes
  // leaving and entering each GPU, and each server when they cross servers.
  const Cluster& c = s_.cluster;
  std::map<int, double> dev_out, dev_in, node_out, node_in;
  double latency = 0, per_byte = 0;
  for (int i = 0; i < r0; ++i) {
    for (int j = 0; j < r1; ++j) {
      const int64_t lo = std::max<int64_t>(int64_t{i} * r1, int64_t{j} * r0);
      const int64_t hi = std::min<int64_t>(int64_t{i + 1} * r1, int64_t{j + 1} * r0);
      if (hi <= lo) continue;
      const double share = static_cast<double>(hi - lo) / (double(r0) * r1);
      const int a = g0 + i, b = g1 + j;
      if (a == b || a >= c.num_devices() || b >= c.num_devices()) continue;
      const Route& route = c.route(a, b);
      latency = std::max(latency, route.latency.seconds());
      const double bw = route.bottleneck_bytes_per_s;
      if (c.device(a).node != c.device(b).node) {
        node_out[c.device(a).node] += share / bw;
        node_in[c.device(b).node] += share / bw;
      } else {
        dev_out[a] += share / bw;
        dev_in[b] += share / bw;
      }
    }
  }
  for (const auto* m : {&dev_out, &dev_in, &node_out, &node_in}) {
    for (const auto& [k, v] : *m) per_byte = std::max(per_byte, v);
  }
  return cut_.emplace(key, std::make_pair(latency, per_byte)).first->second;
}

double NetworkCosts::allreduce(int g, int r, int data, int stride, int t, int64_t bytes) const {
  if (r * data < 2 || bytes <= 0) return 0;
  const Key key{pack(g, r, data, stride), static_cast<uint64_t>(bytes) << 8 | static_cast<uint8_t>(t)};
  if (auto it = ar_.find(key); it != ar_.end()) return it->second;
  // Rank 0 of every group (every rank's data-parallel group looks alike), 1/t of the bytes.
  std::vector<int> devices;
  for (int c = 0; c < data; ++c) {
    for (int i = 0; i < r; ++i) {
      const int d = (c * stride + g + i) * t;
      if (d < s_.cluster.num_devices()) devices.push_back(d);
    }
  }
  double best = std::numeric_limits<double>::infinity();
  for (AllReduceAlgo a : {AllReduceAlgo::kRing, AllReduceAlgo::kTree, AllReduceAlgo::kHierarchical}) {
    if (s_.strategy.allreduce && *s_.strategy.allreduce != a) continue;
    best = std::min(best, allreduce_estimate(s_.cluster, devices, bytes / t, a).seconds());
  }
  return ar_.emplace(key, best).first->second;
}

}  // namespace pipesim::planner
