#include "schedules/collective_estimates.h"

#include <map>

#include "core/checked.h"

namespace pipesim {

namespace {
// One step in which every member of `ring` sends `chunk` bytes to the next, as slow as its
// slowest pair; `sharing` flows leave each sender at once and share its path.
Time slowest_step(const LinkCosts& links, const std::vector<int>& ring, int64_t chunk,
                  int64_t sharing) {
  Time worst;
  for (size_t i = 0; i < ring.size(); ++i) {
    const int a = ring[i], b = ring[(i + 1) % ring.size()];
    if (a != b) worst = max(worst, links.transfer(a, b, chunk * sharing));
  }
  return worst;
}
constexpr const char* kWhat = "a collective estimate";
}  // namespace

// `steps` on the slowest of `edges`.
Time on_slowest(const LinkCosts& links, const std::vector<int>& ring, CollectiveSteps steps,
                int64_t sharing = 1) {
  return checked_mul(slowest_step(links, ring, steps.chunk, sharing), steps.count, kWhat);
}

Time ring_pass_estimate(const LinkCosts& links, const std::vector<int>& devices, int64_t bytes) {
  const auto n = static_cast<int64_t>(devices.size());
  if (n < 2 || bytes <= 0) return Time::zero();
  return on_slowest(links, devices, ring_pass_steps(n, bytes));
}

Time allreduce_estimate(const LinkCosts& links, const std::vector<int>& devices, int64_t bytes,
                        AllReduceAlgo algo) {
  const auto n = static_cast<int64_t>(devices.size());
  if (n < 2 || bytes <= 0) return Time::zero();
  switch (algo) {
    case AllReduceAlgo::kRing:
      return on_slowest(links, devices, ring_allreduce_steps(n, bytes));
    case AllReduceAlgo::kTree: {
      const CollectiveSteps steps = tree_allreduce_steps(n, bytes);
      Time edge;
      for (int64_t pos = 1; pos < n; ++pos) {
        const int a = devices[static_cast<size_t>(pos)],
                  b = devices[static_cast<size_t>((pos - 1) / 2)];
        if (a != b) edge = max(edge, links.transfer(a, b, steps.chunk));
      }
      return checked_mul(edge, steps.count, kWhat);
    }
    case AllReduceAlgo::kHierarchical: {
      std::map<int, std::vector<int>> nodes;
      for (int d : devices) nodes[links.node(d)].push_back(d);
      const auto N = static_cast<int64_t>(nodes.size());
      const auto g = static_cast<int64_t>(nodes.begin()->second.size());
      bool even = true;
      for (const auto& [node, local] : nodes)
        even = even && static_cast<int64_t>(local.size()) == g;
      if (!even || N < 2 || g < 2)
        return allreduce_estimate(links, devices, bytes, AllReduceAlgo::kRing);
      std::vector<int> across;
      for (const auto& [node, local] : nodes) across.push_back(local.front());
      const Time intra = ring_pass_estimate(links, nodes.begin()->second, bytes);
      // g rings (one per local rank) cross the nodes' links at once.
      const Time inter = on_slowest(links, across, hierarchical_across_steps(N, g, bytes), g);
      return checked_add(checked_mul(intra, 2, kWhat), inter, kWhat);
    }
  }
  return Time::zero();
}

AllReduceAlgo fastest_allreduce(const LinkCosts& links, const std::vector<int>& devices,
                                int64_t bytes) {
  AllReduceAlgo out = AllReduceAlgo::kRing;
  Time best = Time::max();
  for (AllReduceAlgo a : {AllReduceAlgo::kRing, AllReduceAlgo::kTree, AllReduceAlgo::kHierarchical}) {
    const Time est = allreduce_estimate(links, devices, bytes, a);
    if (est < best) {
      best = est;
      out = a;
    }
  }
  return out;
}

}  // namespace pipesim
