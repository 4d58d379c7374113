#include "planner/exhaustive.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/json_text.h"
#include "planner/bound.h"

namespace pipesim::planner {
namespace {
size_t u(int v) {
  return static_cast<size_t>(v);
}
}  // namespace

// Least bound first; equal bounds in the order the walk met them (the walk is sequential).
bool Exhaustive::heap_order(const Kept& a, const Kept& b) {
  return a.bound != b.bound ? a.bound < b.bound : a.order < b.order;
}

void Exhaustive::offer(const CostModel& cm, const ScheduleChoice& choice, int data, int tensor,
                       int64_t b, int64_t M, int gpus) {
  const int L = cm.layers();
  const bool inter = choice.kind == ScheduleKind::kInterleaved;
  const bool vee = choice.kind == ScheduleKind::kZbV;
  const int per_copy = gpus / (data * tensor * choice.context);
  // Context and expert parallelism keep one replica per stage (planner/search.h).
  const int max_r = choice.context > 1 || choice.expert > 1 || choice.expert_tensor > 1
                        ? 1
                        : static_cast<int>(std::min<int64_t>(b, per_copy));
  for (int P = 1; P <= std::min(L, per_copy); ++P) {
    for (int v = inter || vee ? 2 : 1; P * v <= L; v *= 2) {
      if (inter && (P < 2 || M % P != 0)) break;
      if (vee && (P < 2 || M < P)) break;
      PlanPoint p;
      p.data = data;
      p.tensor = tensor;
      p.context = choice.context;
      p.expert = choice.expert;
      p.expert_tensor = choice.expert_tensor;
      p.micro_batch = b;
      p.schedule = choice.kind;
      p.warmup = choice.warmup;
      p.recompute = choice.recompute;
      p.zero = choice.zero;
      p.sequence_parallel = choice.sequence_parallel;
      p.virtual_stages = v;
      p.stages.assign(u(P * v), StageSpec{});
      // Replicas per position: 1..max_r each, within the copy's GPUs, in lexicographic
      // order (position i takes at most what leaves one GPU for each position after it).
      std::vector<int> reps(u(P), 1);
      const auto each = [&](const auto& self, int i, int used) -> void {
        if (i == P) {
          walk(cm, p, reps, M);
          return;
        }
        for (int r = 1; r <= std::min(max_r, per_copy - used - (P - 1 - i)); ++r) {
          reps[u(i)] = r;
          self(self, i + 1, used + r);
        }
      };
      each(each, 0, 0);
      if (!inter) break;
    }
  }
}

void Exhaustive::walk(const CostModel& cm, PlanPoint& p, const std::vector<int>& reps, int64_t M) {
  const int P = p.positions();
  for (int g = 0; g < static_cast<int>(p.stages.size()); ++g)
    p.stages[u(g)].replicas = reps[u(p.position_of(g))];
  if (only_ && !only_(p)) return;
  // However the layers are cut, the positions' loads weighted by their replicas add up to
  // the model's compute, plus each position's optimizer step (its part of the parameters,
  // ZeRO-sharded over at most its replicas x data ranks): sum_q r_q (load_q + opt_q) >=
  // M C + min_q r_q OPT / ranks. So the busiest position takes at least that over
  // sum_q r_q: past the incumbent, the whole replica vector is cut off.
  const ScheduleTraits tr = traits(p);
  int speed = 0, slowest = reps.front(), most = 1;
  for (int r : reps) {
    speed += r;
    slowest = std::min(slowest, r);
    most = std::max(most, r);
  }
  const int L = cm.layers();
  const double optimizer = cm.optimizer_time(0, L - 1, tr.zero > 0 ? most * tr.data : 1);
  double share =
      (static_cast<double>(M) * per_replica_compute(cm, 0, L - 1, 1, tr) + slowest * optimizer) /
      speed;
  // And (flushing schedules) one micro-batch's chain through every layer on the most
  // replicas, over every hop between GPUs with the least output any stage can end on.
  if (tr.async) share = 0;  // no time bound for asynchronous schedules (planner/bound.h)
  if (!tr.async) {
    ScheduleTraits plain;
    plain.sequence_parallel = true;
    plain.take_turns = tr.take_turns;
    double chain = per_replica_compute(cm, 0, L - 1, most, plain);
    if (needs_split_backward(p.schedule))
      chain -= cm.weight_time(0, L - 1, most, tr.take_turns) * cm.split(most) / most;
    int64_t least_out = std::numeric_limits<int64_t>::max();
    for (int l = 0; l + 1 < L; ++l) least_out = std::min(least_out, cm.output_bytes(l));
    int hops = 0;
    for (int g = 0; g + 1 < static_cast<int>(p.stages.size()); ++g)
      hops += p.position_of(g) != p.position_of(g + 1);
    if (hops > 0) {
      const double lanes = most * std::max(1, p.tensor) * std::max(1, p.context);
      chain +=
          2 * hops * (hop_.latency_s + static_cast<double>(least_out) / lanes / hop_.bytes_per_s);
    }
    share = std::max(share, chain);
  }
  if (prune_ && share >= cutoff(incumbent_)) return;
  // However the layers are cut, the positions' memory floors add up to at least the whole
  // model's on the most replicas (a floor only shrinks with more replicas): past P times a
  // GPU's room, no plan of this vector fits.
  if (prune_ && static_cast<double>(memory_floor(cm, 0, L - 1, most, tr)) >
                    static_cast<double>(P) * static_cast<double>(room_))
    return;
  // Past the walk's budget, or this vector's: not walked, its share is what is left of it.
  if (walked_ >= kExhaustiveWalk) {
    unwalked_ = std::min(unwalked_, share);
    return;
  }
  std::vector<double> compute(u(P), 0.0);
  std::vector<int64_t> held(u(P), 0);
  vector_walked_ = 0;
  replay_ = OrderReplay::of(p, M, cm.scenario().training.iterations, hop_);
  if (replay_) replay_->prepare(cm, p);
  cuts(cm, p, M, 0, 0, compute, held);
  if (vector_walked_ > kVectorWalk || walked_ >= kExhaustiveWalk) {
    unwalked_ = std::min(unwalked_, share);
    ++unfinished_;
  }
}

// Stage g starts at layer `first`; `compute` holds each position's compute so far (M
// micro-batches of its stages before g) and `held` its memory floor, which only grow as
// stages are added.
void Exhaustive::cuts(const CostModel& cm, PlanPoint& p, int64_t M, int g, int first,
                      std::vector<double>& compute, std::vector<int64_t>& held) {
  ++walked_;
  if (++vector_walked_ > kVectorWalk || walked_ >= kExhaustiveWalk) return;
  if (walked_ % (1 << 16) == 0 && judge_.past_deadline()) {
    walked_ = kExhaustiveWalk;  // nothing more is walked; what is left counts as unwalked
    timed_out_ = true;
    return;
  }
  const int L = cm.layers(), G = static_cast<int>(p.stages.size());
  const ScheduleTraits tr = traits(p);
  StageSpec& s = p.stages[u(g)];
  const auto q = u(p.position_of(g));
  // The last stage takes the rest; another at least one layer and leaves one per stage.
  const int lo = g + 1 == G ? L - 1 : first, hi = g + 1 == G ? L - 1 : L - (G - g);
  for (int last = lo; last <= hi; ++last) {
    s.first_layer = first;
    s.last_layer = last;
    const double add =
        static_cast<double>(M) * per_replica_compute(cm, first, last, s.replicas, tr);
    // Longer stages only add work and memory: past the incumbent or the GPU's memory here,
    // past them for every later cut (no completion fits: the space is that of the plans
    // that fit, whether or not one is known yet).
    if (prune_ && compute[q] + add >= cutoff(incumbent_)) break;
    const int64_t bytes = memory_floor(cm, first, last, s.replicas, tr);
    if (prune_ && held[q] + bytes > room_) break;
    compute[q] += add;
    held[q] += bytes;
    if (g + 1 == G) {
      leaf(cm, p, M);
    } else {
      cuts(cm, p, M, g + 1, last + 1, compute, held);
    }
    compute[q] -= add;
    held[q] -= bytes;
    if (vector_walked_ > kVectorWalk || walked_ >= kExhaustiveWalk) return;
  }
}

void Exhaustive::leaf(const CostModel& cm, PlanPoint& p, int64_t M) {
  double bound = plan_bound(cm, p, M, hop_);
  ++bounded_;
  if (replay_ && !(prune_ && bound >= cutoff(incumbent_)))
    bound = std::max(bound, replay_->bound(cm, p));
  if (prune_ && bound >= cutoff(incumbent_)) return;
  const int64_t floor = plan_memory_floor(cm, p);
  if (prune_ && floor > room_) return;  // cannot fit
  if (kept_.size() >= kExhaustiveKept && bound >= kept_.front().bound) {
    dropped_ = std::min(dropped_, bound);  // no room for it: its bound is what is left
    return;
  }
  std::set<Placement> placements;
  for (PlacementPolicy pol : {PlacementPolicy::kAppendFirst, PlacementPolicy::kFreshFirst,
                              PlacementPolicy::kScatterFirst}) {
    p.placement = pol;
    Placement devices = p.devices(cluster_);
    if (!placements.insert(devices).second) continue;
    keep(bound, floor, {p, cm.estimate(p, M, &devices)});
  }
  p.placement = PlacementPolicy::kAppendFirst;
}

void Exhaustive::keep(double bound, int64_t floor, Costed c) {
  auto less = [](const Kept& a, const Kept& b) { return heap_order(a, b); };
  if (kept_.size() < kExhaustiveKept) {
    kept_.push_back({bound, floor, order_++, std::move(c)});
    std::push_heap(kept_.begin(), kept_.end(), less);
  } else if (heap_order({bound, floor, order_, {}}, kept_.front())) {
    dropped_ = std::min(dropped_, kept_.front().bound);
    std::pop_heap(kept_.begin(), kept_.end(), less);
    kept_.back() = {bound, floor, order_++, std::move(c)};
    std::push_heap(kept_.begin(), kept_.end(), less);
  } else {
    dropped_ = std::min(dropped_, bound);
  }
}

void Exhaustive::warn_incomplete(const Outcome& out, double best, bool capped,
                                 double too_large, Plan& result) const {
  std::vector<std::string> why;
  if (result.timed_out) why.push_back("the time limit was reached");
  if (capped)
    why.push_back(
        fmt::format("more plans were below the best than it simulates ({}, or "
                    "{} times the planner's simulation budget)",
                    kExhaustiveSimulations, kExhaustiveWork));
  if (unfinished_ > 0)
    why.push_back(
        fmt::format("{} pipeline shapes had too many cuts below the best to walk "
                    "(deep interleaving on few micro-batches)",
                    unfinished_));
  if (std::isfinite(too_large)) why.push_back("some plans were too large to simulate");
  if (std::isfinite(dropped_)) why.push_back("more plans were below the best than it keeps");
  if (faults_ > 0) why.push_back("a plan simulated below its bounds");
  std::string reasons;
  for (const std::string& w : why) reasons += (reasons.empty() ? "" : "; ") + w;
  const double gap = std::isfinite(best) && out.lower_bound > 0 ? best / out.lower_bound - 1 : 0;
  result.warnings.push_back(fmt::format(
      "--exhaustive did not cover the whole space ({}); no plan of it is faster than the "
      "best by more than {:.2f} %; --tolerance {:.2g}% or --fix narrows the search",
      reasons.empty() ? "nothing fits to bound it" : reasons, 100 * gap,
      std::ceil(1000 * gap) / 10));
}

Exhaustive::Outcome Exhaustive::solve(std::vector<Candidate>& done, Plan& result) {
  result.timed_out = result.timed_out || timed_out_;
  std::sort(kept_.begin(), kept_.end(), heap_order);
  double best = incumbent_;
  const size_t batch = std::max<size_t>(64, 8 * static_cast<size_t>(std::max(1, opt_.threads)));
  size_t i = 0;
  int64_t simulated = 0;
  bool capped = false;
  double too_large = std::numeric_limits<double>::infinity();
  double work = 0;
  while (!result.timed_out && i < kept_.size() && (!prune_ || kept_[i].bound < cutoff(best))) {
    if (simulated >= kExhaustiveSimulations || work > kExhaustiveWork * opt_.sim_budget) {
      capped = true;
      break;
    }
    std::vector<Costed> next;
    std::vector<double> bounds;
    std::vector<int64_t> floors;
    for (; i < kept_.size() && next.size() < batch && (!prune_ || kept_[i].bound < cutoff(best));
         ++i) {
      Costed& c = kept_[i].plan;
      // Plans simulated before the walk or met twice (equal strategies of two choices).
      if (!seen_.insert(judge_.key_of(c.point)).second || !judge_.orderable(c.point)) continue;
      if (c.estimate.work > opt_.max_sim_work) {
        ++result.too_large;
        too_large = std::min(too_large, kept_[i].bound);
        continue;
      }
      work += c.estimate.work;
      next.push_back(std::move(c));
      bounds.push_back(kept_[i].bound);
      floors.push_back(kept_[i].floor);
    }
    std::vector<std::optional<Candidate>> sims = judge_.simulate_all(next, result);
    for (size_t k = 0; k < sims.size(); ++k) {
      std::optional<Candidate>& c = sims[k];
      // Not simulated after all (too large once its copies did not fold; refused; skipped
      // past the deadline, which leaves the walk incomplete anyway): not covered either.
      if (!c) {
        too_large = std::min(too_large, bounds[k]);
        continue;
      }
      // A plan faster or smaller than its own bounds is a fault of their reasoning: said.
      if ((c->iteration_s < bounds[k] * (1 - 1e-9) || c->peak_memory < floors[k]) && faults_++ == 0)
        result.warnings.push_back(fmt::format(
            "--exhaustive: a plan simulated to {:.6g} s and {} B, below its bounds {:.6g} s "
            "and {} B: the search may have cut off a better plan (please report this "
            "scenario): {}",
            c->iteration_s, c->peak_memory, bounds[k], floors[k], json_text(c->strategy)));
      if (c->fits()) best = std::min(best, c->iteration_s);
      done.push_back(std::move(*c));
    }
    simulated += static_cast<int64_t>(next.size());
    if (result.timed_out) break;
  }
  Outcome out;
  out.bounded = bounded_;
  const double left = i < kept_.size() ? kept_[i].bound : std::numeric_limits<double>::infinity();
  out.lower_bound = std::min({best, left, dropped_, too_large, unwalked_});
  out.complete = !result.timed_out && faults_ == 0 && out.lower_bound >= cutoff(best);
  judge_.progress(fmt::format(
      "exhaustive: {} plans bounded ({} partial pipelines walked), {} below the incumbent "
      "simulated; {}",
      bounded_, walked_, simulated,
      out.complete ? "no plan left can be faster" : "the space was not covered"));
  if (!out.complete) warn_incomplete(out, best, capped, too_large, result);
  return out;
}

}  // namespace pipesim::planner
