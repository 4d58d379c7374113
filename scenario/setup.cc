#include "scenario/setup.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "schedules/lower.h"

namespace pipesim {

namespace {
std::vector<int> position_replicas(const Scenario& s) {
  std::vector<int> r;
  for (int p = 0; p < s.strategy.positions(); ++p)
    r.push_back(s.strategy.stages[static_cast<size_t>(p)].replicas);
  return r;
}

bool split_backward(const Model& m) {
  return std::any_of(m.layers.begin(), m.layers.end(),
                     [](const Layer& l) { return l.split_backward; });
}
}  // namespace

SlotOrders scenario_orders(const Scenario& s) {
  OrderSpec spec;
  spec.kind = s.strategy.schedule;
  spec.positions = s.strategy.positions();
  spec.virtual_stages = s.strategy.virtual_stages;
  spec.micro_batches = static_cast<int>(s.micro_batches);
  spec.iterations = s.training.iterations;
  spec.split_backward = split_backward(s.model);
  spec.replicas = position_replicas(s);
  spec.user = s.user_order.empty() ? nullptr : &s.user_order;
  return build_orders(spec);
}

std::vector<int> stashed_versions(const Scenario& s) {
  const std::vector<int> r = position_replicas(s);
  std::vector<int> out(r.size(), 0);
  if (s.strategy.schedule == ScheduleKind::kPipeDream2BW) out.assign(r.size(), 1);
  if (s.strategy.schedule == ScheduleKind::kPipeDream) {
    // The runtime's warm-up depth: (ranks - 1 - ranks in earlier stages) / ranks here.
    const int total = std::accumulate(r.begin(), r.end(), 0);
    int before = 0;
    for (size_t p = 0; p < r.size(); ++p) {
      out[p] = (total - 1 - before) / r[p];
      before += r[p];
    }
  }
  return out;
}

TaskGraph scenario_task_graph(const Scenario& s) {
  LoweringInput in;
  in.orders = scenario_orders(s);
  in.stages = stage_profiles(s.model, s.strategy.stages);
  in.placement = s.placement;
  in.num_devices = s.cluster.num_devices();
  in.micro_batches_per_iteration = static_cast<int>(s.micro_batches);
  in.param_bytes = bytes_per_param(s.training.precision, s.training.optimizer);
  in.gradient_bytes_per_param = in.param_bytes.gradients;
  in.stashed_versions = stashed_versions(s);
  for (const Device& d : s.cluster.devices()) in.reserved_bytes.push_back(d.gpu.reserved_bytes);
  in.user_order = !s.user_order.empty();
  try {
    return lower(in);
  } catch (InputError& e) {  // a deadlocking hand-written order
    e.set_location_if_empty(s.user_order_at);
    throw;
  }
}

}  // namespace pipesim
