// From a loaded scenario to what the backends consume: the schedule order and the TaskGraph.
#pragma once

#include "scenario/scenario.h"
#include "schedules/order.h"
#include "schedules/task_graph.h"

namespace pipesim {

ScheduleOrder scenario_order(const Scenario& s);
TaskGraph scenario_task_graph(const Scenario& s);

}  // namespace pipesim
