#include "scenario/setup.h"

#include "schedules/lower.h"

namespace pipesim {

ScheduleOrder scenario_order(const Scenario& s) {
  return schedule_order(s.strategy.schedule, static_cast<int>(s.strategy.stages.size()),
                        static_cast<int>(s.micro_batches));
}

TaskGraph scenario_task_graph(const Scenario& s) {
  LoweringInput in;
  in.order = scenario_order(s);
  in.stages = stage_profiles(s.model, s.strategy.stages);
  in.placement = s.placement;
  in.num_devices = s.cluster.num_devices();
  in.micro_batches = static_cast<int>(s.micro_batches);
  in.iterations = s.training.iterations;
  in.param_bytes = bytes_per_param(s.training.precision, s.training.optimizer);
  for (const Device& d : s.cluster.devices()) in.reserved_bytes.push_back(d.gpu.reserved_bytes);
  return lower(in);
}

}  // namespace pipesim
