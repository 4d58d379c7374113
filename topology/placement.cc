#include "topology/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "core/error.h"

namespace pipesim {

namespace {

// The servers by how many GPUs each has free, so that each pick is a lookup (60,000 GPUs on
// 7,500 servers, or 30,000 GPUs of one graph, placed in milliseconds, not a scan of every
// server or free count per GPU).
class FreeServers {
 public:
  explicit FreeServers(const std::vector<std::vector<int>>& free)
      : left_(free.size()), taken_(free.size(), 0) {
    for (size_t n = 0; n < free.size(); ++n) {
      left_[n] = free[n].size();
      if (left_[n] > 0) {
        by_free_[left_[n]].insert(n);
        some_.insert(n);
      }
    }
  }
  size_t remaining(size_t n) const { return left_[n]; }
  // Takes server n's next free GPU: its index among the server's GPUs.
  size_t take(size_t n) {
    const auto level = by_free_.find(left_[n]);
    level->second.erase(n);
    if (level->second.empty()) by_free_.erase(level);
    if (--left_[n] > 0)
      by_free_[left_[n]].insert(n);
    else
      some_.erase(n);
    return taken_[n]++;
  }
  bool any_with(size_t k) const { return by_free_.lower_bound(k) != by_free_.end(); }
  // The first server with the fewest (most) free GPUs among those with at least k; none:
  // the server count.
  size_t fewest(size_t k) const {
    const auto it = by_free_.lower_bound(std::max<size_t>(k, 1));
    return it == by_free_.end() ? left_.size() : *it->second.begin();
  }
  size_t most(size_t k) const {
    if (by_free_.empty() || by_free_.rbegin()->first < std::max<size_t>(k, 1)) return left_.size();
    return *by_free_.rbegin()->second.begin();
  }
  // The first server from `cursor` on (cyclically) with at least k free.
  size_t next_from(size_t cursor, size_t k) const {
    auto it = some_.lower_bound(cursor);
    for (size_t seen = 0; seen < some_.size(); ++seen, ++it) {
      if (it == some_.end()) it = some_.begin();
      if (left_[*it] >= k) return *it;
    }
    return left_.size();
  }

 private:
  std::vector<size_t> left_;
  std::vector<size_t> taken_;                    // GPUs taken per server, in device order
  std::map<size_t, std::set<size_t>> by_free_;  // free GPUs (> 0): the servers, in index order
  std::set<size_t> some_;                        // servers with a GPU free
};

}  // namespace

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
  // Free GPUs per server, in device order, stragglers (cluster.slowdown) last: a strategy
  // that leaves GPUs of a server idle leaves the slowest idle.
  std::vector<std::vector<int>> free(static_cast<size_t>(cluster.num_nodes()));
  for (int d = 0; d < cluster.num_devices(); ++d) {
    free[static_cast<size_t>(cluster.device(d).node)].push_back(d);
  }
  if (!cluster.slowdowns().empty()) {
    for (auto& server : free) {
      std::stable_sort(server.begin(), server.end(), [&](int a, int b) {
        return cluster.device(a).slowdown < cluster.device(b).slowdown;
      });
    }
  }
  FreeServers servers(free);
  const size_t none = free.size();
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
        const size_t need = unit > 1 && unit_start && servers.any_with(unit) ? unit : 1;
        size_t pick = none;
        if (policy == PlacementPolicy::kScatterFirst) {
          pick = servers.next_from(scatter_cursor, unit_start ? need : 1);
          scatter_cursor = (pick + 1) % free.size();
          // Inside a unit, stay on its server while it has room.
          if (!unit_start) {
            const auto last = static_cast<size_t>(cluster.device(devs.back()).node);
            if (servers.remaining(last) > 0) pick = last;
          }
        } else {
          // fresh-first: the server with the most free GPUs (an untouched one first);
          // append-first: the server with the fewest free GPUs that still has one; the
          // first such server in index order.
          pick = policy == PlacementPolicy::kFreshFirst ? servers.most(need) : servers.fewest(need);
          // Keep a stage's replicas together while the chosen server has room (for a whole
          // unit when one starts).
          if (!devs.empty()) {
            const auto last = static_cast<size_t>(cluster.device(devs.back()).node);
            if (servers.remaining(last) >= (unit_start ? need : 1)) pick = last;
          }
        }
        PIPESIM_ASSERT(pick < none, "enough GPUs were checked above");
        devs.push_back(free[pick][servers.take(pick)]);
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
