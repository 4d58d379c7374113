#include "planner/refine.h"

#include <algorithm>
#include <cstddef>

namespace pipesim::planner {

namespace {

// The cut after each stage one layer earlier (stage g gives its last layer to g + 1) or
// one layer later.
void moved_cuts(const PlanPoint& p, std::vector<PlanPoint>& out) {
  for (size_t g = 0; g + 1 < p.stages.size(); ++g) {
    if (p.stages[g].last_layer > p.stages[g].first_layer) {
      PlanPoint n = p;
      --n.stages[g].last_layer;
      --n.stages[g + 1].first_layer;
      out.push_back(std::move(n));
    }
    if (p.stages[g + 1].last_layer > p.stages[g + 1].first_layer) {
      PlanPoint n = p;
      ++n.stages[g].last_layer;
      ++n.stages[g + 1].first_layer;
      out.push_back(std::move(n));
    }
  }
}

// 1F1B's other warm-up, every other ZeRO stage, and data copies traded for replicas.
void other_settings(const PlanPoint& p, int64_t global_batch, std::vector<PlanPoint>& out) {
  // 1F1B's other warm-up (the planner's two: the schedule's and auto).
  if (has_warmup(p.schedule) && p.warmup != Warmup::kDeep) {
    PlanPoint n = p;
    n.warmup = p.warmup == Warmup::kAuto ? Warmup::kSchedule : Warmup::kAuto;
    out.push_back(std::move(n));
  }
  // Every other ZeRO stage (synchronous schedules): sharding the optimizer step can make a
  // plan faster, not only smaller, and the stages are not monotone in time (ZeRO 1 and 2
  // add an exposed all-gather after the step that ZeRO 3's gathers before each pass
  // avoid: AmoebaNet-36 on 2 GPUs is slower at 1 and 2, faster at 3).
  bool shared = p.data > 1;  // some stage has data-parallel ranks to shard over
  for (const StageSpec& s : p.stages) shared = shared || s.replicas > 1;
  if (!is_async(p.schedule) && shared) {
    for (int z = 0; z <= 3; ++z) {
      if (z == p.zero) continue;
      PlanPoint n = p;
      n.zero = z;
      out.push_back(std::move(n));
    }
  }
  // Data copies traded for replicas: every stage's replicas doubled on half the copies, or
  // halved (all even) on twice as many.
  if (p.data % 2 == 0) {
    PlanPoint n = p;
    n.data /= 2;
    bool ok = true;
    for (StageSpec& s : n.stages) ok = ok && (s.replicas *= 2) <= p.micro_batch;
    if (ok) out.push_back(std::move(n));
  }
  if (global_batch % (2 * p.data * p.micro_batch) == 0) {
    PlanPoint n = p;
    n.data *= 2;
    bool ok = true;
    for (StageSpec& s : n.stages) ok = ok && s.replicas % 2 == 0 && (s.replicas /= 2) >= 1;
    if (ok) out.push_back(std::move(n));
  }
}

// Chunked plans: one replica moved from a position to the position before or after it,
// with every chunk of both positions.
void moved_position_replicas(const PlanPoint& p, std::vector<PlanPoint>& out) {
  const int P = p.positions();
  auto reps = [&](int q) { return p.stages[static_cast<size_t>(q)].replicas; };
  for (int q = 0; q < P; ++q) {
    if (reps(q) < 2) continue;
    for (const int to : {q - 1, q + 1}) {
      if (to < 0 || to >= P || reps(to) >= p.micro_batch) continue;
      PlanPoint n = p;
      for (size_t g = 0; g < p.stages.size(); ++g) {
        const int at = p.position_of(static_cast<int>(g));
        if (at == q) --n.stages[g].replicas;
        if (at == to) ++n.stages[g].replicas;
      }
      out.push_back(std::move(n));
    }
  }
}

// Two neighbouring stages merged, on the larger one's replicas (fewer GPUs) or on both
// (the same GPUs, when the micro-batch has the samples); one replica moved to a
// neighbouring stage.
void merged_and_moved(const PlanPoint& p, std::vector<PlanPoint>& out) {
  const size_t G = p.stages.size();
  for (size_t g = 0; g + 1 < G; ++g) {
    const int a = p.stages[g].replicas, b = p.stages[g + 1].replicas;
    for (const int r : {std::max(a, b), a + b}) {
      if (r > p.micro_batch || (r == a + b && r == std::max(a, b))) continue;
      PlanPoint n = p;
      n.stages[g].last_layer = p.stages[g + 1].last_layer;
      n.stages[g].replicas = r;
      n.stages.erase(n.stages.begin() + static_cast<std::ptrdiff_t>(g) + 1);
      if (!n.stage_placement.empty())
        n.stage_placement.erase(n.stage_placement.begin() + static_cast<std::ptrdiff_t>(g) + 1);
      out.push_back(std::move(n));
    }
  }
  for (size_t g = 0; g < G; ++g) {
    if (p.stages[g].replicas < 2) continue;
    for (const size_t to : {g - 1, g + 1}) {  // g - 1 wraps past G when g == 0
      if (to >= G || p.stages[to].replicas >= p.micro_batch) continue;
      PlanPoint n = p;
      --n.stages[g].replicas;
      ++n.stages[to].replicas;
      out.push_back(std::move(n));
    }
  }
}

std::vector<PlanPoint> every_neighbour(const PlanPoint& p, int64_t global_batch) {
  std::vector<PlanPoint> out;
  moved_cuts(p, out);
  other_settings(p, global_batch, out);
  if (p.virtual_stages != 1 || p.schedule == ScheduleKind::kZbV) {
    moved_position_replicas(p, out);
  } else {
    merged_and_moved(p, out);
  }
  return out;
}

}  // namespace

// (Under context or expert parallelism only what such a strategy allows: one replica per
// stage, ZeRO 0 or 1 with experts.)
std::vector<PlanPoint> neighbours(const PlanPoint& p, int64_t global_batch) {
  std::vector<PlanPoint> out = every_neighbour(p, global_batch);
  if (!p.rank_groups()) return out;
  std::erase_if(out, [](const PlanPoint& n) {
    return (n.expert * n.expert_tensor > 1 && n.zero >= 2) ||
           std::any_of(n.stages.begin(), n.stages.end(),
                       [](const StageSpec& s) { return s.replicas > 1; }) ||
           (n.data * n.context * n.tensor) % (n.expert * n.expert_tensor) != 0;
  });
  return out;
}

}  // namespace pipesim::planner
