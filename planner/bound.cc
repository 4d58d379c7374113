#include "planner/bound.h"

#include <algorithm>
#include <vector>

namespace pipesim::planner {

namespace {
// What the cost model's per-replica times are multiplied by for an even split.
double even(const CostModel& cm, int replicas) {
  return cm.split(replicas) / std::max(1, replicas);
}
}  // namespace

double per_replica_compute(const CostModel& cm, int first, int last, int replicas,
                           const ScheduleTraits& t) {
  return cm.compute_time(first, last, replicas, t) * even(cm, replicas);
}

PassTimes pass_times(const CostModel& cm, const PlanPoint& p, int first, int last, int replicas,
                     bool split_w) {
  ScheduleTraits plain;  // per pass: no recompute, nothing run whole on every tensor rank
  plain.sequence_parallel = true;
  plain.take_turns = replicas_take_turns(p.schedule);
  ScheduleTraits again = plain;
  again.recompute = p.schedule == ScheduleKind::kGpipeRecompute ? Recompute::kFull : p.recompute;
  const double e = even(cm, replicas);
  PassTimes t;
  t.f = cm.forward_time(first, last, replicas, plain.take_turns) * e;
  const double all = per_replica_compute(cm, first, last, replicas, plain);
  const double backward = std::max(0.0, all - t.f);
  t.w = split_w ? std::min(backward, cm.weight_time(first, last, replicas, plain.take_turns) * e)
                : 0.0;
  t.b = backward - t.w;
  t.r = std::max(0.0, per_replica_compute(cm, first, last, replicas, again) - all);
  return t;
}

double plan_bound(const CostModel& cm, const PlanPoint& p, int64_t micro_batches,
                  FastestRoute hop) {
  const ScheduleTraits tr = traits(p);
  if (tr.async) return 0;
  const bool split = needs_split_backward(p.schedule);
  const int G = static_cast<int>(p.stages.size()), P = p.positions();
  const auto M = static_cast<double>(micro_batches);
  // Per global stage: one micro-batch's forward and backward on one replica.
  std::vector<PassTimes> pass(static_cast<size_t>(G));
  std::vector<double> compute(static_cast<size_t>(P), 0.0), opt(static_cast<size_t>(P), 0.0);
  std::vector<int> first(static_cast<size_t>(P), G);
  for (int g = 0; g < G; ++g) {
    const StageSpec& s = p.stages[static_cast<size_t>(g)];
    const auto q = static_cast<size_t>(p.position_of(g));
    pass[static_cast<size_t>(g)] =
        pass_times(cm, p, s.first_layer, s.last_layer, s.replicas, split);
    compute[q] += M * per_replica_compute(cm, s.first_layer, s.last_layer, s.replicas, tr);
    const int ranks = tr.zero > 0 ? s.replicas * tr.data : 1;  // ZeRO shards the step
    opt[q] += cm.optimizer_time(s.first_layer, s.last_layer, ranks);
    first[q] = std::min(first[q], g);
  }
  // One micro-batch's chain: every F, every B (W is off it where a zero-bubble order puts W
  // apart), every hop between two GPUs.
  double chain = 0;
  for (int g = 0; g < G; ++g) {
    const StageSpec& s = p.stages[static_cast<size_t>(g)];
    chain += pass[static_cast<size_t>(g)].f + pass[static_cast<size_t>(g)].b;
    if (g + 1 < G && p.position_of(g) != p.position_of(g + 1)) {
      const int lanes = std::max(s.replicas, p.stages[static_cast<size_t>(g) + 1].replicas) *
                        std::max(1, p.tensor) * std::max(1, p.context);
      chain += 2 * (hop.latency_s +
                    static_cast<double>(cm.output_bytes(s.last_layer)) / lanes / hop.bytes_per_s);
    }
  }
  const auto I = static_cast<double>(std::max(1, cm.scenario().training.iterations));
  double bound = 0;
  for (size_t q = 0; q < static_cast<size_t>(P); ++q) {
    double fill = 0, back = 0;
    for (size_t g = 0; g < static_cast<size_t>(first[q]); ++g) {
      fill += pass[g].f;
      back += pass[g].b + pass[g].w;
    }
    const double span =
        fill + I * (compute[q] + opt[q]) - opt[q] + std::max(opt[q], split ? 0.0 : back);
    bound = std::max(bound, span / I);
  }
  return std::max(bound, chain);
}

int64_t memory_floor(const CostModel& cm, int first, int last, int replicas,
                     const ScheduleTraits& t) {
  ScheduleTraits floor = t;
  floor.stashed = 0;  // PipeDream's weight versions: only while micro-batches are in flight
  floor.w_fill = 0;
  floor.all_in_flight = false;
  floor.deep = false;
  floor.recompute = Recompute::kNone;
  // The resident state, and without recompute one micro-batch's activations (split evenly
  // over the replicas, as the memory tracker splits them).
  const int64_t state = cm.stage_memory(first, last, replicas, 0, 1, 0, floor) - cm.reserved();
  if (t.recompute != Recompute::kNone) return state;
  const int64_t one = cm.stage_memory(first, last, replicas, 0, 1, 1, floor) - cm.reserved();
  return state + static_cast<int64_t>(static_cast<double>(one - state) * even(cm, replicas));
}

int64_t plan_memory_floor(const CostModel& cm, const PlanPoint& p) {
  const ScheduleTraits tr = traits(p);
  std::vector<int64_t> held(static_cast<size_t>(p.positions()), 0);
  for (int g = 0; g < static_cast<int>(p.stages.size()); ++g) {
    const StageSpec& s = p.stages[static_cast<size_t>(g)];
    held[static_cast<size_t>(p.position_of(g))] +=
        memory_floor(cm, s.first_layer, s.last_layer, s.replicas, tr);
  }
  return *std::max_element(held.begin(), held.end());
}

FastestRoute fastest_route(const Cluster& c) {
  FastestRoute out;
  const int N = c.num_devices();
  if (N > 64 || N < 2) return out;
  out.latency_s = std::numeric_limits<double>::infinity();
  out.bytes_per_s = 0;
  for (int a = 0; a < N; ++a) {
    for (int b = 0; b < N; ++b) {
      if (a == b) continue;
      const Route& r = c.route(a, b);
      out.latency_s = std::min(out.latency_s, r.latency.seconds());
      out.bytes_per_s = std::max(out.bytes_per_s, r.bottleneck_bytes_per_s);
    }
  }
  return out;
}

std::optional<OrderReplay> OrderReplay::of(const PlanPoint& p, int64_t micro_batches,
                                           int iterations, FastestRoute hop) {
  switch (p.schedule) {
    case ScheduleKind::kGpipe:
    case ScheduleKind::kGpipeRecompute:
    case ScheduleKind::kInterleaved:
    case ScheduleKind::kZbH1:
    case ScheduleKind::kZbH2:
      break;
    case ScheduleKind::kDapple:
      if (p.warmup == Warmup::kAuto) return std::nullopt;
      break;
    default:
      return std::nullopt;
  }
  if (micro_batches > 4096) return std::nullopt;  // the replay would cost more than it saves
  OrderSpec spec;
  spec.kind = p.schedule;
  spec.positions = p.positions();
  spec.virtual_stages = p.virtual_stages;
  spec.micro_batches = static_cast<int>(micro_batches);
  spec.iterations = std::max(1, iterations);
  spec.replicas.assign(static_cast<size_t>(p.positions()), 1);
  if (p.schedule == ScheduleKind::kDapple) {
    // Strategy::warmup's depths (scenario/setup.cc's warmup_depths, without the auto rule).
    const int S = p.positions();
    for (int s = 0; s < S; ++s) {
      const int depth = p.warmup == Warmup::kDeep ? 2 * (S - s) - 1 : S - s;
      spec.in_flight.push_back(std::max(1, std::min<int>(depth, spec.micro_batches)));
    }
  }
  spec.recompute.assign(p.stages.size(), p.recompute != Recompute::kNone ? 1 : 0);
  OrderReplay r;
  try {
    r.orders_ = build_orders(spec);
  } catch (const InputError&) {
    return std::nullopt;
  }
  r.positions_ = p.positions();
  r.micro_batches_ = spec.micro_batches;
  r.iterations_ = spec.iterations;
  r.v_shape_ = is_v_shape(p.schedule);
  r.folded_w_ = !r.orders_.early_input_grad;
  r.hop_ = hop;
  for (int q = 0; q < r.positions_; ++q)
    r.steps_ += r.orders_.steps[static_cast<size_t>(q)][0].size();
  r.steps_ *= static_cast<size_t>(r.iterations_);
  return r;
}

OrderReplay::Steps OrderReplay::step_times(const CostModel& cm, const PlanPoint& p, int first,
                                           int last, int replicas) const {
  const PassTimes t = pass_times(cm, p, first, last, replicas, !folded_w_);
  return {t.f, t.b, t.w, t.r, 0};
}

void OrderReplay::prepare(const CostModel& cm, const PlanPoint& p) {
  const int L = cm.layers();
  least_.assign(static_cast<size_t>(L), Steps{});
  for (int l = L - 1; l >= 0; --l) {
    Steps t = step_times(cm, p, l, l, 1);
    t.bytes = static_cast<double>(cm.output_bytes(l));
    if (l + 1 < L) {
      const Steps& n = least_[static_cast<size_t>(l) + 1];
      t = {std::min(t.f, n.f), std::min(t.b, n.b), std::min(t.w, n.w), std::min(t.r, n.r),
           std::min(t.bytes, n.bytes)};
    }
    least_[static_cast<size_t>(l)] = t;
  }
}

double OrderReplay::bound(const CostModel& cm, const PlanPoint& p, int assigned) const {
  if (assigned < 0) assigned = static_cast<int>(p.stages.size());
  thread_local StageTimes t;
  stage_times(cm, p, assigned, t);
  return replay(t, static_cast<int>(p.stages.size()));
}

void OrderReplay::stage_times(const CostModel& cm, const PlanPoint& p, int assigned,
                              StageTimes& t) const {
  const int P = positions_, G = static_cast<int>(p.stages.size());
  const ScheduleTraits tr = traits(p);
  // Per global stage, one micro-batch on one replica: F, B (with W when folded), W, R; a
  // stage not yet cut takes at least the least of any one layer left (prepare()).
  t.f.assign(static_cast<size_t>(G), 0);
  t.b = t.w = t.r = t.f;
  t.opt.assign(static_cast<size_t>(P), 0.0);
  const int rest = assigned == 0 ? 0 : p.stages[static_cast<size_t>(assigned) - 1].last_layer + 1;
  const bool known = !least_.empty() && rest < static_cast<int>(least_.size());
  for (int g = 0; g < G; ++g) {
    const StageSpec& s = p.stages[static_cast<size_t>(g)];
    const auto k = static_cast<size_t>(g);
    if (g >= assigned) {
      if (!known) continue;
      const Steps& least = least_[static_cast<size_t>(rest)];
      t.f[k] = least.f / s.replicas;
      t.b[k] = least.b / s.replicas;
      t.w[k] = least.w / s.replicas;
      t.r[k] = least.r / s.replicas;
      continue;
    }
    const Steps st = step_times(cm, p, s.first_layer, s.last_layer, s.replicas);
    t.f[k] = st.f;
    t.b[k] = st.b;
    t.w[k] = st.w;
    t.r[k] = st.r;
    const int ranks = tr.zero > 0 ? s.replicas * tr.data : 1;
    t.opt[static_cast<size_t>(p.position_of(g))] +=
        cm.optimizer_time(s.first_layer, s.last_layer, ranks);
  }
  // Per edge g -> g + 1: the least time of its transfer (none on one GPU); an edge out of a
  // stage not yet cut moves at least the least output of a layer left.
  t.hop.assign(static_cast<size_t>(std::max(0, G - 1)), 0.0);
  for (int g = 0; g + 1 < G; ++g) {
    if (p.position_of(g) == p.position_of(g + 1)) continue;
    const int lanes = std::max(p.stages[static_cast<size_t>(g)].replicas,
                               p.stages[static_cast<size_t>(g) + 1].replicas) *
                      std::max(1, p.tensor) * std::max(1, p.context);
    double bytes = 0;
    if (g < assigned) {
      bytes = static_cast<double>(cm.output_bytes(p.stages[static_cast<size_t>(g)].last_layer));
    } else if (known) {
      bytes = least_[static_cast<size_t>(rest)].bytes;
    }
    t.hop[static_cast<size_t>(g)] = hop_.latency_s + bytes / lanes / hop_.bytes_per_s;
  }
}

double OrderReplay::replay(const StageTimes& t, int G) const {
  const int P = positions_;
  // End times per (micro-batch of the run, global stage); -1 until run.
  const int runs = micro_batches_ * iterations_;
  thread_local std::vector<double> f_end, b_end;
  f_end.assign(static_cast<size_t>(runs) * static_cast<size_t>(G), -1.0);
  b_end = f_end;
  const auto at = [&](int m, int g) {
    return static_cast<size_t>(m) * static_cast<size_t>(G) + static_cast<size_t>(g);
  };
  std::vector<double> free(static_cast<size_t>(P), 0.0);
  std::vector<size_t> next(static_cast<size_t>(P), 0);  // step index over all blocks
  size_t total = 0;
  for (int q = 0; q < P; ++q) total += orders_.steps[static_cast<size_t>(q)][0].size();
  total *= static_cast<size_t>(iterations_);
  size_t done = 0;
  for (bool moved = true; moved && done < total;) {
    moved = false;
    for (int q = 0; q < P; ++q) {
      const StepList& list = orders_.steps[static_cast<size_t>(q)][0];
      size_t& i = next[static_cast<size_t>(q)];
      double& now = free[static_cast<size_t>(q)];
      for (; i < list.size() * static_cast<size_t>(iterations_); ++i) {
        const Step& st = list[i % list.size()];
        const int block = static_cast<int>(i / list.size());
        if (st.kind == OpKind::kOptimizer) {
          now += t.opt[static_cast<size_t>(q)];
          ++done;
          moved = true;
          continue;
        }
        const int g = stage_of_position(q, st.chunk, P, v_shape_);
        const int m = block * micro_batches_ + st.micro_batch;
        const auto k = static_cast<size_t>(g);
        double ready = 0;
        if (st.kind == OpKind::kForward) {
          if (g > 0) {
            if ((ready = f_end[at(m, g - 1)]) < 0) break;
            ready += t.hop[k - 1];
          }
          now = std::max(now, ready) + t.f[k];
          f_end[at(m, g)] = now;
        } else if (st.kind == OpKind::kBackward) {
          if ((ready = f_end[at(m, g)]) < 0) break;
          if (g + 1 < G) {
            const double after = b_end[at(m, g + 1)];
            if (after < 0) break;
            ready = std::max(ready, after + t.hop[k]);
          }
          now = std::max(now, ready) + t.b[k];
          b_end[at(m, g)] = now;
        } else if (st.kind == OpKind::kWeightGrad) {
          if (b_end[at(m, g)] < 0) break;
          now = std::max(now, b_end[at(m, g)]) + t.w[k];
        } else {  // kRecompute: after its forward
          if ((ready = f_end[at(m, g)]) < 0) break;
          now = std::max(now, ready) + t.r[k];
        }
        ++done;
        moved = true;
      }
    }
  }
  if (done < total) return 0;  // an order this replay cannot follow: no bound from it
  return *std::max_element(free.begin(), free.end()) / iterations_;
}

double work_bound(const CostModel& cm, int context, int gpus, double optimizer_s) {
  const Scenario& s = cm.scenario();
  ScheduleTraits least;  // no recompute, nothing run whole on every tensor rank
  least.sequence_parallel = true;
  const double per_micro_batch =
      cm.compute_time(0, cm.layers() - 1, 1, least) * cm.tensor() * std::max(1, context);
  const double micro_batches =
      static_cast<double>(s.training.global_batch) / static_cast<double>(s.training.micro_batch);
  return (micro_batches * per_micro_batch + optimizer_s) / std::max(1, gpus);
}

}  // namespace pipesim::planner
