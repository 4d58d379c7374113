// The memory side of the planner's estimate: what one GPU of a stage holds for a plan's
// schedule (planner/cost_model.h).
#include <algorithm>
#include <cmath>

#include "planner/cost_model.h"
#include "schedules/zero.h"

namespace pipesim::planner {
namespace {
size_t u(int v) {
  return static_cast<size_t>(v);
}
}  // namespace

double CostModel::gpu_share(double bytes, double replicated, int replicas,
                            const ScheduleTraits& t) const {
  replicated = t.sequence_parallel ? 0.0 : std::min(replicated, bytes);
  return ((bytes - replicated) / t_ + replicated) / split(replicas);
}

double CostModel::working_set(int replicas, const ScheduleTraits& t) const {
  switch (t.recompute) {
    case Recompute::kFull:
      return static_cast<double>(max_layer_act_) / (split(replicas) * t_);
    case Recompute::kSelective:
      return static_cast<double>(max_core_) / (split(replicas) * t_);
    case Recompute::kNone:
      break;
  }
  return 0;
}

double CostModel::kept_bytes(int first, int last, int replicas, const ScheduleTraits& t) const {
  const auto sum = [&](const std::vector<int64_t>& v) {
    return static_cast<double>(v[u(last) + 1] - v[u(first)]);
  };
  switch (t.recompute) {
    case Recompute::kFull:
      return (sum(kept_full_) + sum(kept_split_) / t_) / split(replicas);
    case Recompute::kSelective:
      return gpu_share(sum(act_) - sum(core_bytes_) + (t.sequence_parallel ? sum(held_sp_) : 0.0),
                       sum(repl_) - sum(core_repl_), replicas, t);
    case Recompute::kNone:
      break;
  }
  return gpu_share(sum(act_), sum(repl_), replicas, t);
}

CostModel::StageBytes CostModel::stage_bytes(int first, int last, int replicas,
                                             const ScheduleTraits& t) const {
  const auto sum = [&](const std::vector<int64_t>& v) {
    return static_cast<double>(v[u(last) + 1] - v[u(first)]);
  };
  StageBytes b;
  b.params =
      (static_cast<double>(this->params(first, last)) - sum(repl_params_)) / t_ + sum(repl_params_);
  // Resident parameter state, ZeRO-sharded over the stage's replicas x data ranks.
  const ZeroBytes z =
      zero_resident_bytes(static_cast<int64_t>(b.params), pb_, t.zero, replicas * t.data);
  b.state = static_cast<double>(z.weights + z.gradients + z.optimizer);
  const auto share = [&](double bytes, double replicated) {
    return gpu_share(bytes, replicated, replicas, t);
  };
  b.act = share(sum(act_), sum(repl_));
  if (t.recompute != Recompute::kNone) {
    b.kept = kept_bytes(first, last, replicas, t);
    b.working = working_set(replicas, t);
  } else {
    b.weight = share(sum(weight_act_), sum(weight_repl_));
  }
  return b;
}

int64_t CostModel::stage_memory(int first, int last, int replicas, int s, int S, int64_t M,
                                const ScheduleTraits& t) const {
  return stage_memory(stage_bytes(first, last, replicas, t), s, S, M, t);
}

int64_t CostModel::stage_memory(const StageBytes& b, int s, int S, int64_t M,
                                const ScheduleTraits& t) const {
  const int stashed = t.stashed < 0 ? S - s - 1 : t.stashed;
  const double state = b.state + b.params * static_cast<double>(stashed * pb_.weights);
  // Micro-batches in flight, each keeping `kept`, plus one working set (a recompute's one
  // layer). Zero bubble defers W(j) past B(j + c s): those micro-batches stay live until
  // their W (ZB-H1 peaks at p on every stage, ZB-H2 at 2p - 1), keeping what W reads (under
  // a recompute at most what F kept: B frees what R allocated again).
  const int64_t pending = t.w_fill > 0 ? std::min<int64_t>(int64_t{t.w_fill} * s, M) : 0;
  const int64_t base = t.all_in_flight ? M : std::min<int64_t>(t.deep ? 2 * (S - s) - 1 : S - s, M);
  const int64_t k = std::min<int64_t>(base + pending, M);
  // zb-1p / zb-2p: up to their memory limit's micro-batches on every stage.
  const auto limit =
      static_cast<double>(t.fills_limit ? std::min<int64_t>(int64_t{t.w_fill} * S, M) : 0);
  double live = 0;
  if (t.recompute != Recompute::kNone) {
    live = std::max(static_cast<double>(k), limit) * b.kept + b.working;
  } else {
    // Past B, a micro-batch waiting for its W keeps only what W reads.
    live = std::max(limit * b.act,
                    static_cast<double>(base) * b.act + static_cast<double>(k - base) * b.weight);
  }
  const double total = state + live + reserved_;
  return total > 9e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(total);
}

namespace {
// The activations position q holds at its peak under Megatron's interleaved order, `kept`
// bytes per micro-batch of global stage g: (P - q - 1) * 2 + (v - 1) * P forwards, then one
// forward and one backward per step, then the backwards; the k-th forward runs chunk
// (k / P) mod v, the k-th backward chunk v - 1 - (k / P) mod v (the reference table's 11,
// 9, 7, 5 forwards in flight for P = 4, v = 2, before the first backward). The peak is
// after a forward; the order repeats every v P steps, so two rounds past the warm-up
// reach it.
int64_t interleaved_activations(const std::vector<double>& kept, int q, int P, int v, int64_t M) {
  const int64_t total = int64_t{v} * M, round = int64_t{v} * P;
  const int64_t warmup = std::min<int64_t>((P - q - 1) * 2 + (v - 1) * P, total);
  const int64_t end = std::min(total, warmup + 2 * round);
  const auto chunk = [&](int64_t k) { return static_cast<int>((k / P) % v); };
  // Step f's forward adds its chunk's activations (chunk(f)); past the warm-up the backward
  // of step f - warmup frees its chunk's (v - 1 - chunk(f - warmup)). Each chunk holds for a
  // run of P steps, so within a run where neither changes every step moves the live bytes by
  // the same amount, and their peak (after the add, before the free) is at one of its ends.
  double live = 0, peak = 0;
  for (int64_t f = 0; f < end;) {
    int64_t next = (f / P + 1) * P;  // the forward's chunk changes
    next = f < warmup ? std::min(next, warmup) : std::min(next, f + P - (f - warmup) % P);
    next = std::min(next, end);
    const double add = kept[u(chunk(f) * P + q)];
    const double step = f < warmup ? add : add - kept[u((v - 1 - chunk(f - warmup)) * P + q)];
    const auto n = static_cast<double>(next - f);
    peak = std::max({peak, live + add, live + (n - 1) * step + add});
    live += n * step;
    f = next;
  }
  return static_cast<int64_t>(peak);
}

}  // namespace

int64_t CostModel::peak_memory(const PlanPoint& p, int64_t M, const ScheduleTraits& t,
                               int64_t above) const {
  const int G = static_cast<int>(p.stages.size()), P = p.positions(), v = p.virtual_stages;
  const bool interleaved = v > 1 && p.schedule != ScheduleKind::kZbV;
  thread_local std::vector<int64_t> dev_mem;  // per position, its chunks together
  thread_local std::vector<double> kept;      // [g]: interleaved, a micro-batch's activations
  dev_mem.assign(u(P), 0);
  kept.assign(u(G), 0.0);
  for (int g = 0; g < G; ++g) {
    const StageSpec& st = p.stages[u(g)];
    const int q = p.position_of(g);
    // zb-v: each chunk as a ZB-H1 stage (P micro-batches of the device's activations).
    // Interleaved: each chunk's static memory here, its activations below.
    if (!interleaved) {
      dev_mem[u(q)] += stage_memory(st.first_layer, st.last_layer, st.replicas, q, P, M, t) -
                       (g < P ? 0 : reserved_);
      // (A position's chunks only add to it.)
      if (dev_mem[u(q)] > above) return dev_mem[u(q)];
      continue;
    }
    ScheduleTraits state = t;  // the chunk's state alone; one working set per device
    state.recompute = Recompute::kNone;
    dev_mem[u(q)] += stage_memory(st.first_layer, st.last_layer, st.replicas, q, P, 0, state) -
                     (g < P ? 0 : reserved_) +
                     (g < P ? static_cast<int64_t>(working_set(st.replicas, t)) : 0);
    kept[u(g)] = kept_bytes(st.first_layer, st.last_layer, st.replicas, t);
  }
  if (interleaved)
    for (int q = 0; q < P; ++q) dev_mem[u(q)] += interleaved_activations(kept, q, P, v, M);
  int64_t peak = 0;
  for (int64_t m : dev_mem) peak = std::max(peak, m);
  return peak;
}

bool CostModel::fits(const PlanPoint& p, int64_t M) const {
  return peak_memory(p, M, traits(p), capacity_) <= capacity_;
}

int64_t CostModel::memory(const PlanPoint& p, int64_t M) const {
  return peak_memory(p, M, traits(p));
}

}  // namespace pipesim::planner
