#include "planner/plan_point.h"

#include <algorithm>

namespace pipesim::planner {

int PlanPoint::gpus() const {
  int per_copy = 0;
  for (int p = 0; p < positions(); ++p) per_copy += stages[static_cast<size_t>(p)].replicas;
  return per_copy * data * tensor * context;
}

Placement PlanPoint::devices(const Cluster& c) const {
  std::vector<int> reps, groups;
  for (int q = 0; q < positions(); ++q) {
    reps.push_back(stages[static_cast<size_t>(q)].replicas * tensor);
    groups.push_back(tensor);
  }
  if (rank_groups())
    return place_rank_ordered(c, reps, data * context, context, placement, groups);
  return stage_placement.empty() ? place(c, reps, data, placement, groups)
                                 : place(c, reps, data, stage_placement, groups);
}

ScheduleTraits traits(const PlanPoint& p) {
  ScheduleTraits t = traits(p.schedule, p.warmup, p.recompute);
  t.zero = p.zero;
  t.data = p.data * p.context;  // context ranks join the data-parallel reduction and ZeRO
  t.sequence_parallel = p.sequence_parallel && p.tensor > 1;
  return t;
}

ScheduleTraits traits(ScheduleKind k, Warmup w, Recompute r) {
  ScheduleTraits t;
  t.recompute = r;
  t.take_turns = replicas_take_turns(k);
  switch (k) {
    case ScheduleKind::kGpipe:
      t.all_in_flight = true;
      break;
    case ScheduleKind::kGpipeRecompute:
      t.recompute = Recompute::kFull;
      t.all_in_flight = true;
      break;
    case ScheduleKind::kDapple:
      t.deep = w != Warmup::kSchedule;
      t.exposed_hops = w == Warmup::kSchedule;
      break;
    case ScheduleKind::kZbH1:
      t.w_fill = 1;
      break;
    case ScheduleKind::kZbH2:
    case ScheduleKind::kZb2p:
      t.w_fill = 2;
      t.deep = true;
      t.fills_limit = k == ScheduleKind::kZb2p;
      break;
    case ScheduleKind::kZb1p:
      t.w_fill = 1;
      t.fills_limit = true;
      break;
    case ScheduleKind::kPipeDream:
      t.async = true;
      t.stashed = -1;
      break;
    case ScheduleKind::kPipeDream2BW:
      t.async = true;
      t.stashed = 1;
      break;
    case ScheduleKind::kZbV:  // ZB-H1's W fill and memory, chunk by chunk
      t.w_fill = 1;
      break;
    case ScheduleKind::kInterleaved:
      break;
  }
  return t;
}

PlanPoint data_twin(const PlanPoint& p) {
  if (p.stages.empty()) return p;
  const int r = p.stages.front().replicas;
  // (Replicas that take whole micro-batches in turn, PipeDream's, have no twin.)
  if (r < 2 || p.micro_batch % r != 0 || replicas_take_turns(p.schedule) ||
      std::any_of(p.stages.begin(), p.stages.end(),
                  [r](const StageSpec& s) { return s.replicas != r; }))
    return p;
  PlanPoint twin = p;
  for (StageSpec& s : twin.stages) s.replicas = 1;
  twin.data *= r;
  twin.micro_batch /= r;
  return twin;
}

std::vector<PlacedPoint> placement_variants(const PlanPoint& p, const Cluster& c, bool with_own) {
  std::vector<PlacedPoint> out;
  auto take = [&](PlanPoint n) {
    Placement devices = n.devices(c);
    for (const PlacedPoint& o : out)
      if (o.devices == devices) return;
    out.push_back({std::move(n), std::move(devices)});
  };
  if (with_own) take(p);
  for (const PlacementPolicy pol : {PlacementPolicy::kAppendFirst, PlacementPolicy::kFreshFirst,
                                    PlacementPolicy::kScatterFirst}) {
    PlanPoint n = p;
    n.placement = pol;
    n.stage_placement.clear();
    take(std::move(n));
  }
  return out;
}

}  // namespace pipesim::planner
