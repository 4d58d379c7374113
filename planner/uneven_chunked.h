// Interleaved and zb-v pipelines with uneven replicas per position, for the analytic
// phase's small spaces (planner/search.cc).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "planner/cost_model.h"

namespace pipesim::planner {

// Uneven chunked plans: every cut up to this many.
inline constexpr double kEveryCut = 256;

// Interleaved and zb-v pipelines with uneven replicas per position on small clusters: for
// every replica vector over P positions (each at most the micro-batch's samples, together
// at most the GPUs of a copy; equal ones too, whose cut may beat the grid's balanced
// one), every cut of the layers into P x v stages when there are at most kEveryCut, else
// the one whose slowest stage or cut transfer is least (a DP over (stages, layers
// placed), each stage's time on its position's replicas, each cut on the routes between
// the positions' contiguous GPUs). The estimate then judges each plan as a whole (the
// caller's `add`, under each placement). Returns false, offering nothing, when the space
// is past `budget` DP steps.
template <class Add>
bool uneven_chunked(const CostModel& cm, const ScheduleTraits& tr, PlanPoint& p, int P, int v,
                    int max_r, int max_gpus, double budget, Add&& add) {
  const auto u = [](int i) { return static_cast<size_t>(i); };
  const int L = cm.layers(), G = P * v;
  if (G > L || P < 2) return true;
  // Replica vectors: count them first (an odometer over 1..max_r, sum <= max_gpus).
  std::vector<int> reps(u(P), 1);
  auto next = [&] {
    for (int i = P - 1; i >= 0; --i) {
      if (reps[u(i)] < max_r) {
        ++reps[u(i)];
        for (int k = i + 1; k < P; ++k) reps[u(k)] = 1;
        int sum = 0;
        for (int r : reps) sum += r;
        if (sum <= max_gpus) return true;
        reps[u(i)] = max_r;  // past the GPUs: carry on to the position before
      }
    }
    return false;
  };
  if (P > max_gpus) return true;
  double vectors = 0;
  for (bool more = true; more && vectors * G * L * L <= budget; more = next()) vectors += 1;
  if (vectors * G * L * L > budget) return false;
  std::fill(reps.begin(), reps.end(), 1);
  p.virtual_stages = v;
  p.stages.assign(u(G), StageSpec{});
  std::vector<int> start(u(P));
  std::vector<double> best(u(G + 1) * u(L + 1));
  std::vector<int> from(best.size());
  const auto at = [&](int k, int j) { return u(k) * u(L + 1) + u(j); };
  // Few layers per stage: every cut, the estimate judging each (the least-block cut can
  // put a large activation on a slow link that a cut one layer away keeps off it, and an
  // interleaved position's load is its chunks together); more: the DP's cut.
  double cuts = 1;
  for (int k = 1; k < G; ++k) cuts = cuts * (L - k) / k;  // C(L - 1, G - 1)
  std::vector<int> first(u(G));  // every cut: the first layer of each stage
  for (bool more = true; more; more = next()) {
    if (cuts <= kEveryCut) {
      for (int k = 0; k < G; ++k) first[u(k)] = k;
      for (bool cut = true; cut;) {
        for (int k = 0; k < G; ++k) {
          StageSpec& st = p.stages[u(k)];
          st.first_layer = first[u(k)];
          st.last_layer = k + 1 < G ? first[u(k) + 1] - 1 : L - 1;
          st.replicas = reps[u(p.position_of(k))];
        }
        add(p, nullptr);
        // The next cut: the last stage start that can move one layer later does, the ones
        // after it follow right behind.
        cut = false;
        for (int k = G - 1; k >= 1 && !cut; --k) {
          if (first[u(k)] < L - (G - k)) {
            ++first[u(k)];
            for (int j = k + 1; j < G; ++j) first[u(j)] = first[u(j) - 1] + 1;
            cut = true;
          }
        }
      }
      continue;
    }
    for (int q = 0, g = 0; q < P; g += reps[u(q)], ++q) start[u(q)] = g;
    std::fill(best.begin(), best.end(), std::numeric_limits<double>::infinity());
    best[at(0, 0)] = 0;
    for (int k = 1; k <= G; ++k) {
      const int q = p.position_of(k - 1), r = reps[u(q)];
      // Stage k - 1 covers layers [i, j): every stage before keeps a layer, every one after too.
      for (int j = k; j <= L - (G - k); ++j) {
        for (int i = k - 1; i < j; ++i) {
          double b = best[at(k - 1, i)];
          if (!std::isfinite(b)) continue;
          b = std::max(b, cm.stage_time(i, j - 1, r, tr));
          if (k >= 2) {
            const int qp = p.position_of(k - 2);
            if (qp != q)
              b = std::max(b, cm.cut_time(start[u(qp)], reps[u(qp)], start[u(q)], r,
                                          cm.output_bytes(i - 1)));
          }
          if (b < best[at(k, j)]) {
            best[at(k, j)] = b;
            from[at(k, j)] = i;
          }
        }
      }
    }
    for (int k = G, j = L; k > 0; j = from[at(k, j)], --k) {
      StageSpec& st = p.stages[u(k - 1)];
      st.first_layer = from[at(k, j)];
      st.last_layer = j - 1;
      st.replicas = reps[u(p.position_of(k - 1))];
    }
    add(p, nullptr);
  }
  return true;
}

}  // namespace pipesim::planner
