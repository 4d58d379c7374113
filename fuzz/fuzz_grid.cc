// `--grid KEY=VALUES` expressions, one per line (at most 3), with `zip` when the first
// line is "zip": parsed, the grid's points counted, and a few points (the first, the last
// and one between) applied to the default scenario and run as in fuzz_scenario.
#include <sstream>

#include "fuzz/harness.h"
#include "sweep/grid.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pipesim::fuzz::expect_result_or_input_error([&] {
    std::vector<pipesim::GridAxis> axes;
    std::istringstream lines(text);
    bool zip = false;
    for (std::string line; std::getline(lines, line) && axes.size() < 3;) {
      if (axes.empty() && !zip && line == "zip") {
        zip = true;
        continue;
      }
      axes.push_back(pipesim::parse_grid_axis(line));
    }
    const pipesim::Grid grid(std::move(axes), zip);
    for (const size_t i : {size_t{0}, grid.size() / 2, grid.size() - 1}) {
      if (i >= grid.size()) continue;
      pipesim::fuzz::expect_result_or_input_error([&] {
        pipesim::fuzz::simulate_and_report(
            pipesim::load_default_scenario(grid.overrides(i)));
      });
    }
  });
  return 0;
}
