#include "schedules/partition.h"

#include <algorithm>
#include <limits>

#include "core/checked.h"
#include "core/error.h"

namespace pipesim {
namespace {

// Prefix sums of the layer costs as the stages see them: stage s's row (the only row when
// every stage sees the same costs).
struct Costs {
  std::vector<std::vector<int64_t>> prefix;
  int n = 0;
  int64_t sum(int s, int from, int to) const {  // layers [from, to) on stage s
    const auto& p = prefix[std::min(static_cast<size_t>(s), prefix.size() - 1)];
    return p[static_cast<size_t>(to)] - p[static_cast<size_t>(from)];
  }
};

// Greedy fill under a bound: each stage takes layers while its sum stays <= bound and
// enough layers remain for the stages after it. Returns the stage starts, or empty if the
// bound cannot be met. (Taking as many as fit is optimal stage by stage: a longer prefix
// never leaves the later stages more to do.)
std::vector<int> fill(const Costs& c, int stages, int64_t bound) {
  const int n = c.n;
  std::vector<int> starts;
  int l = 0;
  for (int s = 0; s < stages; ++s) {
    if (l >= n) return {};
    starts.push_back(l);
    const int first = l;
    const int last_allowed = n - (stages - s - 1);  // leave one layer per later stage
    while (l < last_allowed && (c.sum(s, first, l + 1) <= bound || l == first)) {
      if (c.sum(s, l, l + 1) > bound) return {};
      ++l;
    }
  }
  if (l != n) return {};
  return starts;
}

// best[s][l]: least sum of squares splitting the first l layers into s stages, each at
// most `bound`. Ties keep the earlier split, so the result is deterministic.
std::vector<int> balance(const Costs& cost, int stages, int64_t bound) {
  const int n = cost.n;
  constexpr long double kInf = std::numeric_limits<long double>::infinity();
  const auto idx = [n](int s, int l) {
    return static_cast<size_t>(s) * (static_cast<size_t>(n) + 1) + static_cast<size_t>(l);
  };
  std::vector<long double> best(static_cast<size_t>(stages + 1) * (static_cast<size_t>(n) + 1),
                                kInf);
  std::vector<int> from(best.size(), -1);
  best[idx(0, 0)] = 0;
  for (int s = 1; s <= stages; ++s) {
    for (int l = s; l <= n - (stages - s); ++l) {
      for (int k = l - 1; k >= s - 1; --k) {
        const int64_t c = cost.sum(s - 1, k, l);
        if (c > bound) break;
        const long double prev = best[idx(s - 1, k)];
        if (prev == kInf) continue;
        const long double v = prev + static_cast<long double>(c) * static_cast<long double>(c);
        if (v < best[idx(s, l)]) {
          best[idx(s, l)] = v;
          from[idx(s, l)] = k;
        }
      }
    }
  }
  PIPESIM_ASSERT(from[idx(stages, n)] >= 0, "the min-max bound is feasible");
  std::vector<int> starts(static_cast<size_t>(stages));
  for (int s = stages, l = n; s > 0; --s) {
    l = from[idx(s, l)];
    starts[static_cast<size_t>(s) - 1] = l;
  }
  return starts;
}

std::vector<StageSpec> partition(const Costs& cost, int stages, int replicas) {
  const int n = cost.n;
  PIPESIM_ASSERT(stages >= 1 && stages <= n, "callers check layers >= stages");
  // Bounds on the slowest stage: each layer runs somewhere (at its cheapest at least);
  // no stage takes more than every layer.
  const auto rows = static_cast<int>(cost.prefix.size());
  int64_t lo = 0, hi = 0;
  for (int l = 0; l < n; ++l) {
    int64_t cheapest = std::numeric_limits<int64_t>::max();
    for (int s = 0; s < rows; ++s) cheapest = std::min(cheapest, cost.sum(s, l, l + 1));
    lo = std::max(lo, cheapest);
  }
  for (int s = 0; s < rows; ++s) hi = std::max(hi, cost.sum(s, 0, n));
  // Binary search on the bound: the smallest achievable slowest-stage time.
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (fill(cost, stages, mid).empty())
      lo = mid + 1;
    else
      hi = mid;
  }
  std::vector<int> starts = fill(cost, stages, lo);
  PIPESIM_ASSERT(static_cast<int>(starts.size()) == stages, "the upper bound is always feasible");
  // Second pass: among splits whose slowest stage is `lo`, the most even one (least sum
  // of squared stage times), by dynamic programming when the model is small enough.
  if (static_cast<double>(n) * n * stages <= 2e8) starts = balance(cost, stages, lo);
  std::vector<StageSpec> out;
  for (int s = 0; s < stages; ++s) {
    const int end = s + 1 < stages ? starts[static_cast<size_t>(s) + 1] : n;
    out.push_back({starts[static_cast<size_t>(s)], end - 1, replicas, std::nullopt});
  }
  return out;
}

std::vector<int64_t> prefix_of(const std::vector<int64_t>& cost) {
  std::vector<int64_t> p(cost.size() + 1, 0);
  for (size_t i = 0; i < cost.size(); ++i)
    p[i + 1] = checked_add(p[i], cost[i], "the model's compute time");
  return p;
}

}  // namespace

std::vector<StageSpec> even_partition(const Model& model, int stages, int replicas) {
  std::vector<int64_t> cost;
  for (const Layer& l : model.layers) {
    cost.push_back(checked_add(checked_add(l.forward, l.backward_input, "a layer's time"),
                               l.backward_weight, "a layer's time")
                       .ps_count());
  }
  Costs c;
  c.n = static_cast<int>(cost.size());
  c.prefix.push_back(prefix_of(cost));
  return partition(c, stages, replicas);
}

std::vector<StageSpec> even_partition(const std::vector<std::vector<int64_t>>& cost, int replicas) {
  PIPESIM_ASSERT(!cost.empty(), "at least one stage");
  Costs c;
  c.n = static_cast<int>(cost.front().size());
  for (const auto& row : cost) {
    PIPESIM_ASSERT(static_cast<int>(row.size()) == c.n, "a cost per layer on every stage");
    c.prefix.push_back(prefix_of(row));
  }
  return partition(c, static_cast<int>(cost.size()), replicas);
}

}  // namespace pipesim
