#include "topology/placement.h"

#include <fmt/format.h>

#include <numeric>

#include "core/error.h"

namespace pipesim {

std::string_view to_string(PlacementPolicy p) {
  switch (p) {
    case PlacementPolicy::kFreshFirst:
      return "fresh-first";
    case PlacementPolicy::kAppendFirst:
      return "append-first";
    case PlacementPolicy::kScatterFirst:
      return "scatter-first";
  }
  return "?";
}

std::vector<std::vector<std::vector<int>>> place(const Cluster& cluster,
                                                 const std::vector<int>& replicas, int copies,
                                                 PlacementPolicy policy) {
  const int needed = copies * std::accumulate(replicas.begin(), replicas.end(), 0);
  if (needed > cluster.num_devices()) {
    throw InputError(fmt::format("the strategy needs {} GPUs but the cluster has {}", needed,
                                 cluster.num_devices()),
                     "data x sum of stage replicas <= number of GPUs");
  }
  // Free GPUs per server, in device order.
  std::vector<std::vector<int>> free(static_cast<size_t>(cluster.num_nodes()));
  for (int d = 0; d < cluster.num_devices(); ++d) {
    free[static_cast<size_t>(cluster.device(d).node)].push_back(d);
  }
  std::vector<size_t> next(free.size(), 0);  // first free GPU of each server
  auto remaining = [&](size_t n) { return free[n].size() - next[n]; };
  auto take = [&](size_t n) { return free[n][next[n]++]; };
  size_t scatter_cursor = 0;

  std::vector<std::vector<std::vector<int>>> result(static_cast<size_t>(copies));
  for (int c = 0; c < copies; ++c) {
    for (int r : replicas) {
      std::vector<int> devs;
      while (static_cast<int>(devs.size()) < r) {
        size_t pick = free.size();
        if (policy == PlacementPolicy::kScatterFirst) {
          for (size_t k = 0; k < free.size(); ++k) {
            const size_t n = (scatter_cursor + k) % free.size();
            if (remaining(n) > 0) {
              pick = n;
              break;
            }
          }
          scatter_cursor = (pick + 1) % free.size();
        } else {
          // fresh-first: the server with the most free GPUs (an untouched one first);
          // append-first: the server with the fewest free GPUs that still has one.
          for (size_t n = 0; n < free.size(); ++n) {
            if (remaining(n) == 0) continue;
            if (pick == free.size()) {
              pick = n;
              continue;
            }
            const bool better = policy == PlacementPolicy::kFreshFirst
                                    ? remaining(n) > remaining(pick)
                                    : remaining(n) < remaining(pick);
            if (better) pick = n;
          }
          // Keep a stage's replicas together while the chosen server has room.
          if (!devs.empty()) {
            const auto last = static_cast<size_t>(cluster.device(devs.back()).node);
            if (remaining(last) > 0) pick = last;
          }
        }
        PIPESIM_ASSERT(pick < free.size(), "enough GPUs were checked above");
        devs.push_back(take(pick));
      }
      result[static_cast<size_t>(c)].push_back(std::move(devs));
    }
  }
  return result;
}

}  // namespace pipesim
