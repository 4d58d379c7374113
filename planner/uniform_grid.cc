#include "planner/uniform_grid.h"

#include <algorithm>

namespace pipesim::planner {

UniformGrid::Point& UniformGrid::point(int r, int S, int v, bool vee) {
  const uint64_t key = (static_cast<uint64_t>(r) << 40) | (static_cast<uint64_t>(S) << 20) |
                       (static_cast<uint64_t>(v) << 1) | (vee ? 1U : 0U);
  std::unique_ptr<Point>& slot = points_[key];
  if (!slot) {
    slot = std::make_unique<Point>();
    PlanPoint& p = slot->plan;
    p.stages = cm_.balanced(S * v);
    for (StageSpec& st : p.stages) st.replicas = r;
    p.data = data_;
    p.tensor = cm_.tensor();
    p.micro_batch = cm_.scenario().training.micro_batch;
    // Only the chunks' layout matters to the terms: round robin, or zb-v's V.
    p.schedule = vee ? ScheduleKind::kZbV : ScheduleKind::kInterleaved;
    p.virtual_stages = v;
  }
  return *slot;
}

double UniformGrid::work(Point& x) {
  if (!x.have_work) {
    x.work = cm_.simulation_work(x.plan, M_);
    x.have_work = true;
  }
  return x.work;
}

double UniformGrid::time_bound(Point& x, const PlanPoint& plan) {
  const int key = CostModel::stage_time_key(traits(plan));
  auto it = x.busiest.find(key);
  if (it == x.busiest.end()) it = x.busiest.emplace(key, cm_.busiest_position(plan)).first;
  return static_cast<double>(std::max<int64_t>(0, M_ - 2)) * it->second;
}

PlanTerms UniformGrid::terms(Point& x, int zero) {
  if (!x.have_cut) {
    x.link_load = cm_.cut_terms(x.plan, nullptr, x.cut);
    x.have_cut = true;
  }
  work(x);
  if (zero == 3 && !x.have_gather) {
    cm_.gather_terms(x.plan, nullptr, x.gather);
    x.have_gather = true;
  }
  const bool ring = zero > 0;
  std::vector<double>& ar = ring ? x.ring : x.cheapest;
  bool& have = ring ? x.have_ring : x.have_cheapest;
  if (!have) {
    cm_.allreduce_terms(x.plan, nullptr, ring, ar, &x.share);
    have = true;
  }
  return {x.cut.data(), x.gather.data(), ar.data(), x.work, x.link_load, x.share.data()};
}

}  // namespace pipesim::planner
