// The uniform grid's pipelines (the same replica count on every stage, the compute-balanced
// cut) for one cost model, data degree and micro-batch count, each with the estimate's
// terms that do not depend on the schedule (PlanTerms: cuts, gradient all-reduces, ZeRO-3's
// weight gathers, the simulation work). Every schedule choice and memory level of a search
// at that micro-batch, tensor and data degree shares them, so each layout is costed on the
// network once instead of once per choice.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "planner/cost_model.h"

namespace pipesim::planner {

class UniformGrid {
 public:
  // `cm` must outlive every use of the grid.
  UniformGrid(const CostModel& cm, int data, int64_t micro_batches)
      : cm_(cm), data_(data), M_(micro_batches) {}

  struct Point {
    PlanPoint plan;  // S * v stages of r replicas (its schedule: zb-v or not)
    std::vector<double> cut, gather, cheapest, ring, share;  // share: PlanTerms::share
    bool have_cut = false, have_gather = false, have_cheapest = false, have_ring = false,
         have_work = false;
    double work = 0, link_load = 0;
    std::map<int, double> busiest;  // CostModel::busiest_position by stage_time_key
  };
  // S positions of r replicas with v chunks each (in a V for zb-v).
  Point& point(int r, int S, int v, bool vee);
  // Its terms under ZeRO stage `zero`, computed on first use.
  PlanTerms terms(Point& p, int zero);
  // Its simulation work (PlanTerms::work) alone, computed on first use.
  double work(Point& p);
  // CostModel::time_bound of `plan` (the point's stages under a schedule), its busiest
  // position computed once per CostModel::stage_time_key.
  double time_bound(Point& p, const PlanPoint& plan);

 private:
  const CostModel& cm_;
  int data_;
  int64_t M_;
  std::unordered_map<uint64_t, std::unique_ptr<Point>> points_;
};

}  // namespace pipesim::planner
