#include "schedules/partition.h"

#include <algorithm>
#include <limits>

#include "core/checked.h"
#include "core/error.h"

namespace pipesim {
namespace {

// Greedy fill under a bound: each stage takes layers while its sum stays <= bound and
// enough layers remain for the stages after it. Returns the stage starts, or empty if the
// bound cannot be met.
std::vector<int> fill(const std::vector<int64_t>& cost, int stages, int64_t bound) {
  const int n = static_cast<int>(cost.size());
  std::vector<int> starts;
  int l = 0;
  for (int s = 0; s < stages; ++s) {
    if (l >= n) return {};
    starts.push_back(l);
    int64_t sum = 0;
    const int last_allowed = n - (stages - s - 1);  // leave one layer per later stage
    while (l < last_allowed && (sum + cost[static_cast<size_t>(l)] <= bound || sum == 0)) {
      if (cost[static_cast<size_t>(l)] > bound) return {};
      sum += cost[static_cast<size_t>(l)];
      ++l;
    }
  }
  if (l != n) return {};
  return starts;
}

// best[s][l]: least sum of squares splitting the first l layers into s stages, each at
// most `bound`. Ties keep the earlier split, so the result is deterministic.
std::vector<int> balance(const std::vector<int64_t>& cost, int stages, int64_t bound) {
  const auto n = static_cast<int>(cost.size());
  std::vector<int64_t> prefix(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i)
    prefix[static_cast<size_t>(i) + 1] =
        prefix[static_cast<size_t>(i)] + cost[static_cast<size_t>(i)];
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
        const int64_t c = prefix[static_cast<size_t>(l)] - prefix[static_cast<size_t>(k)];
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

}  // namespace

std::vector<StageSpec> even_partition(const Model& model, int stages, int replicas) {
  const int n = static_cast<int>(model.layers.size());
  PIPESIM_ASSERT(stages >= 1 && stages <= n, "callers check layers >= stages");
  std::vector<int64_t> cost;
  int64_t lo = 0, hi = 0;
  for (const Layer& l : model.layers) {
    cost.push_back(checked_add(checked_add(l.forward, l.backward_input, "a layer's time"),
                               l.backward_weight, "a layer's time")
                       .ps_count());
    lo = std::max(lo, cost.back());
    hi = checked_add(hi, cost.back(), "the model's compute time");
  }
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

}  // namespace pipesim
