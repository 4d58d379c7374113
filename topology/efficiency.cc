#include "topology/efficiency.h"

#include <algorithm>

namespace pipesim {

double EfficiencyCurve::at(double size) const {
  if (points.empty()) return 0;
  if (!(size > points.front().size)) return points.front().efficiency;  // NaN too
  if (size >= points.back().size) return points.back().efficiency;
  const auto hi = std::upper_bound(points.begin(), points.end(), size,
                                   [](double s, const EfficiencyPoint& p) { return s < p.size; });
  const auto lo = hi - 1;
  const double f = (size - lo->size) / (hi->size - lo->size);
  return lo->efficiency + f * (hi->efficiency - lo->efficiency);
}

}  // namespace pipesim
