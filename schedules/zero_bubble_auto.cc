#include "schedules/zero_bubble_auto.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace pipesim {
namespace {

enum Kind { kF = 0, kB = 1, kW = 2 };

// The variant switches of `manual_order`.
struct Rules {
  bool bubble_before_first_b = false;  // warm-up may end with a forward that overlaps the wait
  bool prioritize_b = false;           // a stage well ahead of the next may skip its forward
  bool greedy_w = false;               // a W may fill a gap smaller than the worst bubble so far
};

// One replay of the heuristic; times are picoseconds.
class Replay {
 public:
  Replay(const StageCosts& c, int micro_batches, int memory_factor, Rules rules)
      : c_(c), S_(static_cast<int>(c.forward.size())), M_(micro_batches), rules_(rules) {
    const auto S = static_cast<size_t>(S_);
    for (auto* v : {&f_, &b_, &w_}) v->assign(S, 0);
    for (auto* v : {&mem_, &end_, &bubble_, &limit_}) v->assign(S, 0);
    for (auto* v : {&tf_, &tb_, &tw_})
      v->assign(S, std::vector<int64_t>(static_cast<size_t>(M_), -1));
    order_.resize(S);
    for (size_t j = 0; j < S; ++j)
      limit_[j] = int64_t{memory_factor} * S_ * c_.activation[j];  // p M_B or 2p M_B
  }

  void run() {
    for (int i = 0; i < M_; ++i) {
      if (i == 0) {
        first_micro_batch();
        continue;
      }
      std::vector<int> need(static_cast<size_t>(S_), 0);
      for (int j = 0; j < S_; ++j) need[u(j)] = wants_forward(j);
      // A stage runs a forward only if the next one does (forwards flow downstream).
      for (int j = S_ - 2; j >= 0; --j) need[u(j)] = std::min(need[u(j)], need[u(j) + 1]);
      for (int j = 0; j < S_; ++j) {
        if (need[u(j)] == 0) continue;
        make_room(j, act(j));
        if (j > 0) fill_gap(j, tf_[u(j) - 1][u(f_[u(j)])] + send(j - 1));
        put(j, kF);
      }
      for (int j = S_ - 1; j >= 0; --j) {
        PIPESIM_ASSERT(b_[u(j)] == i, "one backward per stage per iteration");
        if (j + 1 < S_) fill_gap(j, tb_[u(j) + 1][u(i)] + grad(j));
        if (j == 0 && f_[0] == M_) {
          while (w_[0] < b_[0]) put(0, kW);
        }
        put(j, kB);
      }
    }
    for (int j = 0; j < S_; ++j) {
      while (w_[u(j)] < M_) put(j, kW);
    }
  }

  // The paper's measure: each stage from its first forward's start to its last W's end.
  int64_t span() const {
    int64_t best = 0;
    for (int j = 0; j < S_; ++j)
      best = std::max(best, tw_[u(j)][u(M_ - 1)] - tf_[u(j)][0] + cost(j, kF));
    return best;
  }
  ScheduleOrder take_order() { return std::move(order_); }

 private:
  static size_t u(int v) { return static_cast<size_t>(v); }
  int64_t cost(int j, Kind k) const {
    const auto& t = k == kF ? c_.forward : k == kB ? c_.backward : c_.weight;
    return t[u(j)].ps_count();
  }
  int64_t act(int j) const { return c_.activation[u(j)]; }
  int64_t kept(int j) const {
    return c_.weight_activation.empty() ? act(j) : c_.weight_activation[u(j)];
  }
  int64_t send(int e) const { return c_.send[u(e)].ps_count(); }
  int64_t grad(int e) const { return c_.gradient[u(e)].ps_count(); }
  int64_t max_bubble() const { return top_bubble_; }

  void put(int j, Kind k) {
    const size_t s = u(j);
    int& n = k == kF ? f_[s] : k == kB ? b_[s] : w_[s];
    PIPESIM_ASSERT(n < M_, "each step once");
    // Memory: F allocates the stage's activations, B frees what W does not read, W the rest.
    const int64_t mem = k == kF ? act(j) : k == kW ? -kept(j) : kept(j) - act(j);
    PIPESIM_ASSERT(mem_[s] + mem <= limit_[s], "the heuristic keeps to its memory limit");
    int64_t t = end_[s] + cost(j, k);
    const int64_t no_wait = t;
    if (k == kF && j > 0) t = std::max(t, tf_[s - 1][u(n)] + send(j - 1) + cost(j, k));
    if (k == kB && j + 1 < S_) t = std::max(t, tb_[s + 1][u(n)] + grad(j) + cost(j, k));
    if (k == kB) PIPESIM_ASSERT(tf_[s][u(n)] >= 0, "B after its F");
    if (k == kW) PIPESIM_ASSERT(tb_[s][u(n)] >= 0, "W after its B");
    if (f_[s] > 0) {
      bubble_[s] += t - no_wait;
      top_bubble_ = std::max(top_bubble_, bubble_[s]);  // bubbles only grow
    }
    end_[s] = t;
    (k == kF ? tf_ : k == kB ? tb_ : tw_)[s][u(n)] = t;
    mem_[s] += mem;
    order_[s].push_back({k == kF   ? OpKind::kForward
                         : k == kB ? OpKind::kBackward
                                   : OpKind::kWeightGrad,
                         n, 0});
    ++n;
  }

  // Runs pending W steps until `bytes` more fit under the limit.
  void make_room(int j, int64_t bytes) {
    while (mem_[u(j)] + bytes > limit_[u(j)]) {
      PIPESIM_ASSERT(w_[u(j)] < b_[u(j)], "p micro-batches in flight always fit");
      put(j, kW);
    }
  }

  // Stage j is about to wait for an input that arrives at `ready`: W steps that end by then
  // fill the wait; one more may overrun it (always, or when the wait is no longer than the
  // worst bubble so far and the greedy rule is on).
  void fill_gap(int j, int64_t ready) {
    const size_t s = u(j);
    while (w_[s] < b_[s] && end_[s] + cost(j, kW) <= ready) put(j, kW);
    if (w_[s] < b_[s] && end_[s] < ready) {
      if (ready - end_[s] > max_bubble() - bubble_[s] || rules_.greedy_w) put(j, kW);
    }
  }

  // Micro-batch 0: its forward on every stage, then as many extra forwards on each stage as
  // fit (memory) before its gradient is expected back, never more than the stage before.
  void first_micro_batch() {
    for (int j = 0; j < S_; ++j) put(j, kF);
    std::vector<int> extra(u(S_), 0);
    int64_t back = 0;  // when micro-batch 0's gradient leaves stage j + 1
    for (int j = S_ - 1; j >= 0; --j) {
      if (j == S_ - 1) {
        back = tf_[u(j)][0] + cost(j, kB);
        continue;
      }
      int64_t mem = mem_[u(j)], t = end_[u(j)];
      const int64_t arrival = back + grad(j);
      while (f_[u(j)] + extra[u(j)] < M_ && mem + act(j) <= limit_[u(j)]) {
        if (rules_.bubble_before_first_b ? t + cost(j, kF) > arrival : t >= arrival) break;
        mem += act(j);
        t += cost(j, kF);
        ++extra[u(j)];
      }
      back = std::max(t, arrival) + cost(j, kB);
    }
    // A stage's forwards need the stage before's: never more than it has. The reference
    // then keeps each stage one short of the one before unless the stage would hold every
    // micro-batch; with uneven stages a cheap stage may fit all M where its feeder fits
    // fewer, and the cap keeps the replay from ordering a forward (and later a backward)
    // before its input can exist.
    for (int j = 1; j < S_; ++j) {
      extra[u(j)] = std::min(extra[u(j)], extra[u(j) - 1]);
      while (extra[u(j)] > 0 && extra[u(j)] >= extra[u(j) - 1] && f_[u(j)] + extra[u(j)] < M_)
        --extra[u(j)];
    }
    for (int j = 0; j < S_; ++j) {
      for (int k = 0; k < extra[u(j)]; ++k) put(j, kF);
    }
    for (int j = S_ - 1; j >= 0; --j) put(j, kB);
  }

  // Whether stage j runs a forward this iteration (before the downstream minimum).
  int wants_forward(int j) const {
    const size_t s = u(j);
    if (f_[s] >= M_) return 0;
    if (!rules_.prioritize_b || j + 1 >= S_ || f_[s] < f_[s + 1] + 2) return 1;
    // Far ahead of the next stage: skip the forward if the gradient is due before it ends.
    const int64_t due = end_[s + 1] + cost(j + 1, kF) + cost(j + 1, kB) + grad(j);
    if (end_[s] >= due) return 0;
    int64_t w_time = 0, mem = mem_[s] + act(j);
    for (int n = 0; mem > limit_[s] && w_[s] + n < b_[s]; ++n) {
      w_time += cost(j, kW);
      mem -= kept(j);
    }
    if (end_[s] + cost(j, kF) + w_time <= due) return 1;
    return due - end_[s] <= max_bubble() - bubble_[s] ? 0 : 1;
  }

  const StageCosts& c_;
  int S_, M_;
  Rules rules_;
  std::vector<int> f_, b_, w_;  // steps placed so far, per stage
  std::vector<int64_t> mem_, end_, bubble_, limit_;
  int64_t top_bubble_ = 0;  // the largest of bubble_
  std::vector<std::vector<int64_t>> tf_, tb_, tw_;  // [stage][micro-batch] end times
  ScheduleOrder order_;
};

// The best of the eight variants, in the reference's trial order (first wins ties).
ScheduleOrder best(const StageCosts& costs, int micro_batches, int factor) {
  PIPESIM_ASSERT(!costs.forward.empty() && micro_batches >= 1 && factor >= 1,
                 "a pipeline to schedule");
  ScheduleOrder order;
  int64_t span = -1;
  for (bool before : {true, false}) {
    for (bool prioritize : {true, false}) {
      for (bool greedy : {true, false}) {
        Replay r(costs, micro_batches, factor, {before, prioritize, greedy});
        r.run();
        if (span < 0 || r.span() < span) {
          span = r.span();
          order = r.take_order();
        }
      }
    }
  }
  return order;
}

}  // namespace

ScheduleOrder zero_bubble_auto_order(const StageCosts& costs, int micro_batches,
                                     int memory_factor) {
  return best(costs, micro_batches, memory_factor);
}
}  // namespace pipesim
