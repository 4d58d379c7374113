// Phase 1's plans as phase 2 can use them, kept while the search runs instead of the whole
// pool (a large cluster's search costs hundreds of thousands of plans, each with its stage
// list).
//
// Phase 2 takes, in its order (plans that fit by estimated time, then the rest by memory;
// equal keys in the order the search offered them), the first distinct strategies up to its
// count, then the first members of the estimated time/memory front (plans that fit and need
// less memory than every plan before them in that order). A Shortlist keeps the first
// `keep` plans of that order and the whole front; when phase 2 needs more of the order than
// it kept (duplicates or plans it cannot simulate used up the kept ones), `complete()` says
// whether what it kept is the whole order anyway. Plans whose simulation would cost more
// than `max_work` are counted, not kept, as phase 2 drops them. It also keeps the first two
// distinct plans that fit of every schedule family (schedule and chunk count), which phase
// 2 simulates too.
//
// Costs: O(log keep) per plan that enters the kept order and O(front) per plan that joins
// the front; a plan that does neither is compared and dropped, not copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "planner/cost_model.h"

namespace pipesim::planner {

struct Costed {
  PlanPoint point;
  Estimate estimate;
};

class Shortlist {
 public:
  Shortlist(size_t keep, double max_work) : keep_(keep), max_work_(max_work) {}

  // The next plan of the search; copied only when it enters the kept order or the front.
  void offer(const PlanPoint& p, const Estimate& e);
  // A plan that also fits under a lower ZeRO stage or without sequence parallelism (the
  // ranking runs that one): a candidate for the time/memory front alone.
  void offer_lean(const PlanPoint& p, const Estimate& e);

  // Whether a plan of `memory` bytes that takes at least `time` could enter the kept
  // order, the front or its family (`lean`: the front alone, as offer_lean), were it
  // offered now (`work`: Estimate::work); when not, the search may call passed() instead of
  // costing it in full.
  bool wanted(bool fits, double time, int64_t memory, double work, ScheduleKind schedule,
              int chunks, bool lean) const;
  // Whether a plan that does not fit, of `work`, could enter the kept order whatever its
  // memory (wanted(false, ...) without the memory).
  bool may_keep_unfit(double work) const;
  // Counts a plan offer() would have dropped as it would have (`work`: Estimate::work).
  void passed(double work);

  // The kept plans in phase 2's order.
  std::vector<Costed> best() const;
  // The front in phase 2's order (by time, memory strictly decreasing).
  std::vector<Costed> front() const;
  // The first two plans that fit of every schedule family, in phase 2's order.
  std::vector<Costed> families() const;
  // Whether best() holds every plan offered (that was not too large).
  bool complete() const { return kept_.size() == offered_; }
  int too_large() const { return too_large_; }

 private:
  struct Key {
    bool fits;
    double time;
    int64_t memory;
    size_t index;  // order offered
  };
  struct Entry {
    Key key;
    Costed plan;
  };
  // Phase 2's order: fitting first, by time; then by memory; then as offered.
  static bool before(const Key& a, const Key& b);
  // The plans of `order` sorted into phase 2's order.
  static std::vector<Costed> in_order(std::vector<const Entry*> order);
  void enter_kept(const Key& k, const PlanPoint& p, const Estimate& e);
  void enter_front(const Key& k, const PlanPoint& p, const Estimate& e);
  void enter_family(const Key& k, const PlanPoint& p, const Estimate& e);

  size_t keep_;
  double max_work_;
  size_t offered_ = 0;  // plans offered (offer)
  size_t index_ = 0;    // the next key's index, for offer and offer_lean alike
  int too_large_ = 0;
  std::vector<Entry> kept_;   // a max-heap under before(): the last kept plan on top
  std::vector<Entry> front_;  // sorted by (time, index)
  std::map<std::pair<ScheduleKind, int>, std::vector<Entry>> family_;  // each sorted, <= 2
};

}  // namespace pipesim::planner
