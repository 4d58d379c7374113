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

}  // namespace pipesim
