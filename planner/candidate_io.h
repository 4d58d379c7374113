// A simulated candidate as bytes and back: what one MPI rank sends the others when the
// planner's simulations are shared among ranks (parallel/distributed.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "planner/plan.h"

namespace pipesim {

// Empty for no candidate (not simulated, or refused by the loader).
std::string save_candidate(const std::optional<Candidate>& c);
// `point`: the strategy the candidate was simulated for (every rank has the list).
std::optional<Candidate> load_candidate(std::string_view bytes, const planner::PlanPoint& point);

}  // namespace pipesim
