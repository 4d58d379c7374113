// The plans `plan` simulates beside its own: the baseline planners' (planner/baselines.h)
// and the user's --compare strategies, each ranked against what the search simulated.
#pragma once

#include <string>
#include <vector>

#include "planner/judge.h"
#include "planner/plan.h"

namespace pipesim::planner {

// PipeDream's, DAPPLE's and plain data parallelism's plans for `base`, each simulated under
// DAPPLE's schedule (PipeDream's for an asynchronous scenario); DAPPLE's under each of its
// three placement policies, the fastest that fits kept. A plan whose estimated work passes
// `max_sim_work`, or that the time limit stops, keeps the reason in Baseline::error.
std::vector<Baseline> simulate_baselines(const Scenario& base, const Judge& judge,
                                         double max_sim_work, Clock::time_point t0);

// The scenario with one of PlanOptions::compare as its strategy, read like the file's
// strategy section; an InputError naming --compare if it is not a valid one.
Scenario compared_scenario(const Scenario& base, const std::string& text);

// The user's strategies (PlanOptions::compare), simulated and ranked against `done`.
std::vector<Compared> simulate_compared(const Scenario& base, const Judge& judge,
                                        const std::vector<std::string>& strategies,
                                        const std::vector<Candidate>& done);

}  // namespace pipesim::planner
