// The public API of sweeps (SPEC section 7), for the command line, bindings and other
// programs:
//
//   std::vector<GridAxis> axes{parse_grid_axis("training.micro_batch=1..64*2")};
//   const Sweep s = run_sweep("scenario.yaml", axes, SweepOptions{});
//   write_sweep_csv(std::cout, s);          // or to_json(s)
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "sweep/grid.h"
#include "sweep/runner.h"

namespace pipesim {

// The report fields of every point, in the CSV after the swept keys.
inline constexpr const char* kSweepFields[] = {"makespan_s",
                                               "iteration_time_s",
                                               "throughput_samples_per_s",
                                               "peak_memory_bytes",
                                               "oom",
                                               "bubble_fraction",
                                               "mfu",
                                               "error"};

// {"scenario_file", "keys", "zip", "overrides", "points": [{KEY: value..., fields...}],
//  "count", "failed", "out_of_memory", "version"}. A swept value that reads as a JSON
// number is one, otherwise a string as given.
nlohmann::ordered_json to_json(const Sweep& s);
// A point in the JSON form, and back (what one MPI rank sends another); the swept values
// are not read back (`values` stays empty: the grid has them).
nlohmann::ordered_json point_json(const Sweep& s, const SweepPoint& p);
SweepPoint point_from_json(const nlohmann::ordered_json& j);

// One row per point: the swept keys, then kSweepFields. RFC 4180 quoting.
void write_sweep_csv(std::ostream& out, const Sweep& s);
// The points as an aligned table (at most `rows`, then a count of the rest) and a summary.
std::string sweep_table(const Sweep& s, size_t rows = 50);

}  // namespace pipesim
