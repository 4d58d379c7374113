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
                                                 PlacementPolicy policy,
                                                 const std::vector<int>& group) {
  return place(cluster, replicas, copies, std::vector<PlacementPolicy>(replicas.size(), policy),
               group);
}

std::vector<std::vector<std::vector<int>>> place(const Cluster& cluster,
                                                 const std::vector<int>& replicas, int copies,
                                                 const std::vector<PlacementPolicy>& policies,
                                                 const std::vector<int>& group) {
  PIPESIM_ASSERT(policies.size() == replicas.size(), "one placement policy per stage");
  const int needed = copies * std::accumulate(replicas.begin(), replicas.end(), 0);
  if (needed > cluster.num_devices()) {
    throw InputError(fmt::format("the strategy needs {} GPUs but the cluster has {}", needed,
                                 cluster.num_devices()),
                     "data x sum of stage replicas x tensor <= number of GPUs");
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
    for (size_t st = 0; st < replicas.size(); ++st) {
      const int r = replicas[st];
      const PlacementPolicy policy = policies[st];
      const size_t unit = group.empty() ? 1 : static_cast<size_t>(std::max(1, group[st]));
      std::vector<int> devs;
      while (static_cast<int>(devs.size()) < r) {
        // At the start of a unit, only servers with room for all of it (if any has).
        const bool unit_start = devs.size() % unit == 0;
        bool whole = false;
        for (size_t n = 0; n < free.size() && unit > 1 && unit_start; ++n)
          whole = whole || remaining(n) >= unit;
        auto usable = [&](size_t n) {
          return remaining(n) > 0 && (!whole || remaining(n) >= unit);
        };
        size_t pick = free.size();
        if (policy == PlacementPolicy::kScatterFirst) {
          for (size_t k = 0; k < free.size(); ++k) {
            const size_t n = (scatter_cursor + k) % free.size();
            if (unit_start ? usable(n) : remaining(n) > 0) {
              pick = n;
              break;
            }
          }
          scatter_cursor = (pick + 1) % free.size();
          // Inside a unit, stay on its server while it has room.
          if (!unit_start) {
            const auto last = static_cast<size_t>(cluster.device(devs.back()).node);
            if (remaining(last) > 0) pick = last;
          }
        } else {
          // fresh-first: the server with the most free GPUs (an untouched one first);
          // append-first: the server with the fewest free GPUs that still has one.
          for (size_t n = 0; n < free.size(); ++n) {
            if (!usable(n)) continue;
            if (pick == free.size()) {
              pick = n;
              continue;
            }
            const bool better = policy == PlacementPolicy::kFreshFirst
                                    ? remaining(n) > remaining(pick)
                                    : remaining(n) < remaining(pick);
            if (better) pick = n;
          }
          // Keep a stage's replicas together while the chosen server has room (for a whole
          // unit when one starts).
          if (!devs.empty()) {
            const auto last = static_cast<size_t>(cluster.device(devs.back()).node);
            if (unit_start ? usable(last) : remaining(last) > 0) pick = last;
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

std::vector<std::vector<std::vector<int>>> place_rank_ordered(const Cluster& cluster,
                                                              const std::vector<int>& replicas,
                                                              int copies, int context,
                                                              PlacementPolicy policy,
                                                              const std::vector<int>& group) {
  std::vector<int> whole, units;
  for (size_t p = 0; p < replicas.size(); ++p) {
    whole.push_back(replicas[p] * copies);
    units.push_back((group.empty() ? 1 : group[p]) * context);
  }
  const auto one = place(cluster, whole, 1, policy, units);
  std::vector<std::vector<std::vector<int>>> out(static_cast<size_t>(copies));
  for (size_t p = 0; p < replicas.size(); ++p) {
    const std::vector<int>& devs = one.front()[p];
    for (int c = 0; c < copies; ++c) {
      const auto from = devs.begin() + static_cast<std::ptrdiff_t>(c) * replicas[p];
      out[static_cast<size_t>(c)].emplace_back(from, from + replicas[p]);
    }
  }
  return out;
}

}  // namespace pipesim
