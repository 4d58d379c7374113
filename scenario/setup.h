// From a loaded scenario to what the backends consume: the schedule orders and the TaskGraph.
#pragma once

#include "scenario/scenario.h"
#include "schedules/order.h"
#include "schedules/task_graph.h"

namespace pipesim {

SlotOrders scenario_orders(const Scenario& s);
TaskGraph scenario_task_graph(const Scenario& s);
// Extra weight versions each position keeps: PipeDream stashes one per micro-batch in
// flight beyond the current one (S - s - 1 on a straight pipeline), 2BW keeps one.
std::vector<int> stashed_versions(const Scenario& s);

// The all-reduce algorithm each position's gradient group uses: strategy.allreduce, or for
// auto the one with the least estimated time on idle links for that group and size.
std::vector<AllReduceAlgo> allreduce_algorithms(const Scenario& s);
// Idle-link estimate of an all-reduce of `bytes` among `devices` (alpha-beta, consistent
// with how schedules/collectives.cc decomposes each algorithm).
Time allreduce_estimate(const Cluster& c, const std::vector<int>& devices, int64_t bytes,
                        AllReduceAlgo algo);

}  // namespace pipesim
