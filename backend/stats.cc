#include "backend/stats.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pipesim {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  PIPESIM_ASSERT(a.size() == b.size(), "paired lists");
  double concordant = 0, discordant = 0, ties_a = 0, ties_b = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = i + 1; j < a.size(); ++j) {
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0 && db == 0) continue;
      if (da == 0) {
        ++ties_a;
      } else if (db == 0) {
        ++ties_b;
      } else if ((da > 0) == (db > 0)) {
        ++concordant;
      } else {
        ++discordant;
      }
    }
  }
  const double denom =
      std::sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b));
  return denom == 0 ? 1.0 : (concordant - discordant) / denom;
}

double relative_error(double predicted, double measured) {
  return measured == 0 ? 0 : std::abs(predicted - measured) / measured;
}

}  // namespace pipesim
