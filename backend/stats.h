// Small statistics for comparing measured and simulated runs.
#pragma once

#include <vector>

namespace pipesim {

// The q-quantile (0..1) by linear interpolation between order statistics; 0 when empty.
double quantile(std::vector<double> v, double q);
inline double median(std::vector<double> v) {
  return quantile(std::move(v), 0.5);
}
// Kendall's tau-b between two equally long lists (ties counted as neither concordant nor
// discordant, normalised by the untied pairs of each list); 1 when fewer than two points.
double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);
// |predicted - measured| / measured, 0 when measured is 0.
double relative_error(double predicted, double measured);

}  // namespace pipesim
