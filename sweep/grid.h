// What-if grids (SPEC section 7): `--grid KEY=VALUES` parsed into axes, and the points of
// the sweep, in a fixed order whatever runs them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "scenario/scenario.h"

namespace pipesim {

// One swept key and its values, each the YAML text a `--set KEY=VALUE` would take.
struct GridAxis {
  std::string key;
  std::vector<std::string> values;
};

// Most points one sweep may have (the product of the axes' lengths, or their common
// length with zip).
inline constexpr size_t kMaxSweepPoints = 1'000'000;

// "KEY=VALUES" where VALUES is a comma-separated list whose items are YAML values or
// integer ranges: "a,b,c", "1..64" (every integer), "1..64*2" (1, 2, 4, ..., 64: times the
// factor while not past the end). Commas inside {}, [] or quotes do not split, so
// `strategy={schedule: gpipe, pipeline: 4},{schedule: dapple, pipeline: 4}` is two values.
// Throws InputError (at "--grid") for a malformed expression.
GridAxis parse_grid_axis(const std::string& text);

// The points of the grid in order: the cartesian product with the first axis varying
// slowest (as nested loops in the order given), or with `zip` the i-th value of every axis
// together. Checks the axes: distinct keys, equal lengths under zip, at most
// kMaxSweepPoints points. Throws InputError.
class Grid {
 public:
  Grid(std::vector<GridAxis> axes, bool zip);

  size_t size() const { return size_; }
  const std::vector<GridAxis>& axes() const { return axes_; }
  bool zip() const { return zip_; }
  // The value index of every axis at point `i` (< size()).
  std::vector<size_t> indices(size_t i) const;
  // The point's overrides, one per axis.
  std::vector<Override> overrides(size_t i) const;

 private:
  std::vector<GridAxis> axes_;
  bool zip_ = false;
  size_t size_ = 1;
};

}  // namespace pipesim
