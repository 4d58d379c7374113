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

Time ring_pass_estimate(const LinkCosts& links, const std::vector<int>& devices, int64_t bytes) {
  const auto n = static_cast<int64_t>(devices.size());
  if (n < 2 || bytes <= 0) return Time::zero();
  return checked_mul(slowest_step(links, devices, ceil_div(bytes, n), 1), n - 1, kWhat);
}

Time allreduce_estimate(const LinkCosts& links, const std::vector<int>& devices, int64_t bytes,
                        AllReduceAlgo algo) {
  const auto n = static_cast<int64_t>(devices.size());
  if (n < 2 || bytes <= 0) return Time::zero();
  switch (algo) {
    case AllReduceAlgo::kRing:
      return checked_mul(ring_pass_estimate(links, devices, bytes), 2, kWhat);
    case AllReduceAlgo::kTree: {
      // Two trees of depth D, each pipelining tree_chunks(bytes) = K chunks of bytes / (2 K) up and
      // down; a member's links carry both trees' chunks.
      int64_t depth = 0;
      while ((int64_t{1} << (depth + 1)) <= n) ++depth;
      Time edge;
      for (int64_t pos = 1; pos < n; ++pos) {
        const int a = devices[static_cast<size_t>(pos)],
                  b = devices[static_cast<size_t>((pos - 1) / 2)];
        if (a != b)
          edge = max(
              edge,
              links.transfer(
                  a, b, checked_mul(2, ceil_div(bytes, 2 * int64_t{tree_chunks(bytes)}), kWhat)));
      }
      return checked_mul(edge, 2 * (depth + tree_chunks(bytes) - 1), kWhat);
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
      const Time inter =
          checked_mul(slowest_step(links, across, ceil_div(bytes, g * N), g), 2 * (N - 1), kWhat);
      return checked_add(checked_mul(intra, 2, kWhat), inter, kWhat);
    }
  }
  return Time::zero();
}

}  // namespace pipesim
