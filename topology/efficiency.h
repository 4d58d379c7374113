// Efficiency curves: the share of a peak rate an operation reaches as a function of its
// size (FLOPs for compute, bytes for memory traffic), as tables of (size, efficiency)
// points in the form of Calculon's gflops_efficiency / MB_efficiency tables.
#pragma once

#include <vector>

namespace pipesim {

struct EfficiencyPoint {
  double size = 0;  // FLOPs or bytes of one operation
  double efficiency = 0;
  bool operator==(const EfficiencyPoint&) const = default;
};

// Points sorted by size. Between two points the efficiency is interpolated linearly in
// the size; below the first point it is the first point's, above the last the last's.
struct EfficiencyCurve {
  std::vector<EfficiencyPoint> points;
  double at(double size) const;
  static EfficiencyCurve constant(double efficiency) { return {{{0, efficiency}}}; }
  bool operator==(const EfficiencyCurve&) const = default;
};

}  // namespace pipesim
