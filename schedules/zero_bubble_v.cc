#include "schedules/zero_bubble_v.h"

#include <algorithm>
#include <array>
#include <deque>

#include "core/error.h"

namespace pipesim {

namespace {

// Step kinds and the builder's chunk numbering: forwards run chunk 0 then 1, backwards
// "chunk" 0 first (model chunk 1, the way back up) then 1 (model chunk 0).
enum Kind { kF = 0, kB = 1, kW = 2 };

struct Infeasible {};  // the builder's rules do not fit this (S, M)

class VReplay {
 public:
  VReplay(const StageCosts& c, int micro_batches, bool fill_f, bool fill_b,
          std::vector<int64_t> approved)
      : S_(static_cast<int>(c.forward.size()) / 2),
        M_(micro_batches),
        fill_f_(fill_f),
        fill_b_(fill_b),
        approved_(std::move(approved)) {
    const auto S = static_cast<size_t>(S_);
    count_.assign(S, {});
    for (auto* v : {&cur_, &mem_, &bubble_, &limit_}) v->assign(S, 0);
    end_.assign(6 * S * static_cast<size_t>(M_), -1);
    pending_.resize(S);
    order_.resize(S);
    for (auto& o : order_) o.reserve(6 * static_cast<size_t>(M_));  // F, B, W of two chunks
    if (approved_.empty()) approved_.assign(S, -1);
    max_approved_ = *std::max_element(approved_.begin(), approved_.end());
    // Each (kind, chunk, device)'s run time, input transfer and memory change, looked up
    // once here rather than at every step.
    slot_.resize(6 * S);
    for (int k = kF; k <= kW; ++k) {
      for (int chunk = 0; chunk < 2; ++chunk) {
        for (int i = 0; i < S_; ++i) {
          const auto g = u(stage_of(static_cast<Kind>(k), chunk, i));
          const auto& run = k == kF ? c.forward : k == kB ? c.backward : c.weight;
          // F allocates the chunk's activations, B frees what W does not read, W the rest.
          const int64_t kept =
              c.weight_activation.empty() ? c.activation[g] : c.weight_activation[g];
          Slot& sl = slot_[(u(k) * 2 + u(chunk)) * S + u(i)];
          sl.run = run[g].ps_count();
          sl.mem = k == kF ? c.activation[g] : k == kW ? -kept : kept - c.activation[g];
          if (has_input(static_cast<Kind>(k), chunk, i))
            sl.in = k == kF ? c.send[g - 1].ps_count() : c.gradient[g].ps_count();
        }
      }
    }
    for (int i = 0; i < S_; ++i)
      limit_[u(i)] = int64_t{S_} * (act(kF, 0, i) + act(kF, 1, i));  // p M_B
  }

  void run() {
    warm_up();
    for (int round = 0; round < 2 * M_; ++round) {
      backwards();
      forwards();
    }
    for (int i = 0; i < S_; ++i) {
      while (!pending_[u(i)].empty()) put_w(i);
    }
  }

  int64_t max_bubble(int stage = -1) const {
    int64_t m = top_bubble_;
    if (stage >= 0) m = std::max(m, max_approved_ - approved_[u(stage)]);
    return m;
  }
  const std::vector<int64_t>& bubbles() const { return bubble_; }
  bool read_fill_f() const { return read_f_; }
  bool read_fill_b() const { return read_b_; }
  ScheduleOrder take_order() { return std::move(order_); }

 private:
  static size_t u(int v) { return static_cast<size_t>(v); }
  int stage_of(Kind k, int chunk, int i) const {
    return stage_of_position(i, k == kF ? chunk : 1 - chunk, S_, true);
  }
  struct Slot {
    int64_t run = 0, in = 0, mem = 0;  // duration, input transfer, memory change
  };
  const Slot& slot(Kind k, int chunk, int i) const {
    return slot_[(u(k) * 2 + u(chunk)) * u(S_) + u(i)];
  }
  int64_t cost(Kind k, int chunk, int i) const { return slot(k, chunk, i).run; }
  int64_t act(Kind k, int chunk, int i) const { return slot(k, chunk, i).mem; }  // F only
  // The transfer into F or B: the output of the stage before, the gradient of the one after.
  int64_t comm(Kind k, int chunk, int i) const { return slot(k, chunk, i).in; }
  // Devices side by side for one micro-batch: a step reads its neighbour's end.
  int64_t& end(Kind k, int chunk, int i, int n) {
    return end_[((u(k) * 2 + u(chunk)) * u(M_) + u(n)) * u(S_) + u(i)];
  }
  int& count(int i, Kind k, int chunk) { return count_[u(i)][u(k) * 2 + u(chunk)]; }
  // The cross-device input of F/B (chunk, device i, micro-batch n), if it has one.
  bool has_input(Kind k, int chunk, int i) const {
    return k != kW && (chunk == 1 ? i + 1 < S_ : i > 0);
  }
  int64_t& input_end(Kind k, int chunk, int i, int n) {
    return end(k, chunk, chunk == 1 ? i + 1 : i - 1, n);
  }

  void put(Kind k, int chunk, int i) {
    const int n = count(i, k, chunk);
    if (n >= M_) throw Infeasible{};
    const Slot& sl = slot(k, chunk, i);
    const int64_t mem = sl.mem;
    if (mem_[u(i)] + mem > limit_[u(i)]) throw Infeasible{};
    // The step before it on this device: F chunk 0 -> F chunk 1 -> B 0 -> B 1; W after its B.
    if (k == kW ? end(kB, chunk, i, n) < 0
                : (k != kF || chunk != 0) &&
                      end(chunk == 0 ? static_cast<Kind>(k - 1) : k, 1 - chunk, i, n) < 0)
      throw Infeasible{};
    int64_t t = cur_[u(i)] + sl.run;
    const int64_t no_wait = t;
    if (has_input(k, chunk, i)) {
      const int64_t in = input_end(k, chunk, i, n);
      if (in < 0) throw Infeasible{};
      t = std::max(t, in + sl.in + sl.run);
    }
    if (count(i, kF, 0) > 0) {
      bubble_[u(i)] += t - no_wait;
      top_bubble_ = std::max(top_bubble_, bubble_[u(i)]);  // bubbles only grow
    }
    end(k, chunk, i, n) = t;
    cur_[u(i)] = t;
    mem_[u(i)] += mem;
    // Model chunk of the step: forwards as numbered, backward chunks the other way round.
    const int model_chunk = k == kF ? chunk : 1 - chunk;
    order_[u(i)].push_back({k == kF   ? OpKind::kForward
                            : k == kB ? OpKind::kBackward
                                      : OpKind::kWeightGrad,
                            n, model_chunk});
    if (k == kB) pending_[u(i)].push_back(chunk);
    ++count(i, k, chunk);
  }

  void put_w(int i) {
    if (pending_[u(i)].empty()) throw Infeasible{};
    const int chunk = pending_[u(i)].front();
    pending_[u(i)].pop_front();
    put(kW, chunk, i);
  }

  // Before F/B (chunk) on device i: W steps that end before its input arrives fill the
  // wait; one more overruns it when the wait exceeds the bubble budget (for the forward
  // when fill_f, for backward chunk 0 when fill_b, always for backward chunk 1).
  void fill_gap(Kind k, int chunk, int i) {
    if (!has_input(k, chunk, i)) return;
    const int n = count(i, k, chunk);
    const int64_t ready = input_end(k, chunk, i, n) + comm(k, chunk, i);
    auto& pending = pending_[u(i)];
    while (!pending.empty() && ready >= cur_[u(i)] + cost(kW, pending.front(), i)) put_w(i);
    if (!pending.empty() && ready - cur_[u(i)] > max_bubble(i) - bubble_[u(i)]) {
      // Which flags this replay read: a replay that never reads one runs the same whatever
      // its value.
      if (k == kF) {
        read_f_ = true;
      } else if (chunk == 0) {
        read_b_ = true;
      }
      if (k == kF ? fill_f_ : (chunk == 1 || fill_b_)) put_w(i);
    }
  }

  void warm_up() {
    for (int i = 0; i < S_; ++i) put(kF, 0, i);
    for (int i = S_ - 1; i >= 0; --i) {
      if (i == S_ - 1) {
        put(kF, 1, i);
        continue;
      }
      // Chunk-0 forwards (on this device and the ones before it) until chunk 1's first
      // forward comes back up, within memory (room for 2 + 2i more) and micro-batches.
      const int64_t back = end(kF, 1, i + 1, 0) + comm(kF, 1, i);
      while (mem_[u(i)] + act(kF, 0, i) * (2 + 2 * int64_t{i}) <= limit_[u(i)] &&
             cur_[u(i)] + cost(kF, 0, i) <= back && count(i, kF, 0) < M_ - i) {
        for (int j = 0; j <= i; ++j) put(kF, 0, j);
      }
      put(kF, 1, i);
    }
    // Each device catches up with the one before it, chunks alternating.
    int chunk = 0;
    for (int i = 1; i < S_; ++i) {
      while (count(i, kF, 0) + count(i, kF, 1) < count(i - 1, kF, 0) + count(i - 1, kF, 1) ||
             (count(i, kF, 1) <= count(i - 1, kF, 1) && count(i - 1, kF, 1) < M_)) {
        for (int j = S_ - 1; j >= i; --j) {
          if (count(j, kF, chunk) < M_) put(kF, chunk, j);
        }
        chunk = 1 - chunk;
      }
    }
  }

  // One backward per device: chunk 1 (model chunk 0) where its gradient is ready, on the
  // deepest devices first, then chunk 0 on the others from device 0 down.
  void backwards() {
    auto& todo = todo_;
    auto& zeros = zeros_;
    todo.clear();
    zeros.clear();
    for (int i = 0; i < S_; ++i) {
      const int b0 = count(i, kB, 0), b1 = count(i, kB, 1);
      bool one = false;
      if (b1 < b0) one = i == S_ - 1 || end(kB, 1, i + 1, b1) >= 0 || b0 >= M_;
      (one ? todo : zeros).push_back({i, one ? 1 : 0});
    }
    std::reverse(todo.begin(), todo.end());
    todo.insert(todo.end(), zeros.begin(), zeros.end());
    for (const auto& [i, chunk] : todo) {
      fill_gap(kB, chunk, i);
      put(kB, chunk, i);
    }
  }

  // One forward per device where one is ready: chunk 1 when its input has arrived, else
  // chunk 0 when its input has.
  void forwards() {
    for (int i = 0; i < S_; ++i) {
      const int f0 = count(i, kF, 0), f1 = count(i, kF, 1);
      if (f1 >= M_) continue;
      int chunk = -1;
      if (f1 >= f0) {
        chunk = 0;
      } else if (i == S_ - 1 || end(kF, 1, i + 1, f1) >= 0) {
        chunk = 1;
      } else if (f0 < M_ && (i == 0 || end(kF, 0, i - 1, f0) >= 0)) {
        chunk = 0;
      }
      if (chunk < 0) continue;
      while (mem_[u(i)] + act(kF, chunk, i) > limit_[u(i)]) put_w(i);
      fill_gap(kF, chunk, i);
      put(kF, chunk, i);
    }
  }

  int S_, M_;
  bool fill_f_, fill_b_;
  bool read_f_ = false, read_b_ = false;  // whether fill_gap's choice depended on them
  std::vector<int64_t> approved_;
  int64_t max_approved_ = -1;
  std::vector<std::array<int, 6>> count_;  // [device][kind * 2 + chunk]
  std::vector<int64_t> cur_, mem_, bubble_, limit_;
  std::vector<Slot> slot_;                         // [(kind * 2 + chunk) * S + device]
  int64_t top_bubble_ = 0;                         // the largest of bubble_
  std::vector<std::pair<int, int>> todo_, zeros_;  // backwards()'s scratch
  std::vector<int64_t> end_;  // end time of each (kind, chunk, device, micro-batch); -1: not yet
  std::vector<std::deque<int>> pending_;  // backward chunks whose W is still to run
  ScheduleOrder order_;
};

struct Result {
  ScheduleOrder order;
  int64_t bubble = 0;
};

// Which fill flags a chain of replays read (fill_gap's only use of them).
struct Reads {
  bool fill_f = false, fill_b = false;
};

// try_v_schedule: one replay, then again with its per-device bubbles as the budget while
// that lowers the worst bubble (at most 64 rounds; the worst bubble strictly decreases).
std::optional<Result> attempt(const StageCosts& c, int M, bool fill_f, bool fill_b,
                              std::vector<int64_t> approved, int depth, Reads& reads) {
  VReplay r(c, M, fill_f, fill_b, approved);
  bool feasible = true;
  try {
    r.run();
  } catch (const Infeasible&) {
    feasible = false;
  }
  reads.fill_f |= r.read_fill_f();
  reads.fill_b |= r.read_fill_b();
  if (!feasible) return std::nullopt;
  Result out{r.take_order(), r.max_bubble()};
  const int64_t max_approved =
      approved.empty() ? -1 : *std::max_element(approved.begin(), approved.end());
  if (depth < 64 && (max_approved < 0 || out.bubble < max_approved)) {
    auto again = attempt(c, M, fill_f, fill_b, r.bubbles(), depth + 1, reads);
    if (again && again->bubble < out.bubble) return again;
  }
  return out;
}

std::optional<Result> best(const StageCosts& c, int M) {
  PIPESIM_ASSERT(c.forward.size() % 2 == 0 && !c.forward.empty() && M >= 1, "a V to schedule");
  struct Tried {
    bool fill_f, fill_b;
    Reads reads;
  };
  std::vector<Tried> tried;
  std::optional<Result> out;
  for (bool fill_b : {true, false}) {
    for (bool fill_f : {true, false}) {
      if (out && out->bubble == 0) return out;  // nothing later can be strictly better
      // A chain that never read a flag replays identically under its other value, and an
      // equal bubble never replaces the earlier result: skip the repeat.
      const bool repeat = std::any_of(tried.begin(), tried.end(), [&](const Tried& t) {
        return (t.fill_f == fill_f || !t.reads.fill_f) && (t.fill_b == fill_b || !t.reads.fill_b);
      });
      if (repeat) continue;
      Reads reads;
      auto r = attempt(c, M, fill_f, fill_b, {}, 0, reads);
      tried.push_back({fill_f, fill_b, reads});
      if (r && (!out || r->bubble < out->bubble)) out = std::move(r);
    }
  }
  return out;
}

}  // namespace

std::optional<ScheduleOrder> zero_bubble_v_order(const StageCosts& costs, int micro_batches) {
  auto r = best(costs, micro_batches);
  if (!r) return std::nullopt;
  return std::move(r->order);
}

}  // namespace pipesim
