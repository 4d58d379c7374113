#include "planner/shortlist.h"

#include <algorithm>
#include <utility>

namespace pipesim::planner {

namespace {
constexpr size_t kPerFamily = 2;
}  // namespace

bool Shortlist::before(const Key& a, const Key& b) {
  if (a.fits != b.fits) return a.fits;
  if (a.fits ? a.time != b.time : a.memory != b.memory)
    return a.fits ? a.time < b.time : a.memory < b.memory;
  return a.index < b.index;
}

void Shortlist::offer(const PlanPoint& p, const Estimate& e) {
  if (e.work > max_work_) {
    ++too_large_;
    return;
  }
  ++offered_;
  const Key k{e.fits, e.iteration_s, e.peak_memory, index_++};
  enter_kept(k, p, e);
  if (k.fits) {
    enter_front(k, p, e);
    enter_family(k, p, e);
  }
}

void Shortlist::offer_lean(const PlanPoint& p, const Estimate& e) {
  if (e.work > max_work_ || !e.fits) return;
  enter_front({e.fits, e.iteration_s, e.peak_memory, index_++}, p, e);
}

bool Shortlist::wanted(bool fits, double time, int64_t memory, double work, ScheduleKind schedule,
                       int chunks, bool lean) const {
  if (work > max_work_) return false;
  // A later plan takes no longer than `time` only if it is no slower: the keys below rank
  // at least as early as the plan's own.
  const Key k{fits, time, memory, index_};
  if (!lean && (kept_.size() < keep_ || before(k, kept_.front().key))) return true;
  if (!fits) return false;
  // The front member at or before `time` with the least memory bars it if it needs no more.
  const auto pos = std::upper_bound(front_.begin(), front_.end(), time,
                                    [](double t, const Entry& x) { return t < x.key.time; });
  if (pos == front_.begin() || std::prev(pos)->key.memory > memory) return true;
  if (lean) return false;
  const auto f = family_.find({schedule, chunks});
  if (f == family_.end()) return true;
  const auto at = std::upper_bound(f->second.begin(), f->second.end(), k,
                                   [](const Key& a, const Entry& x) { return before(a, x.key); });
  return static_cast<size_t>(at - f->second.begin()) < kPerFamily;
}

bool Shortlist::may_keep_unfit(double work) const {
  return work <= max_work_ && (kept_.size() < keep_ || !kept_.front().key.fits);
}

void Shortlist::passed(double work) {
  if (work > max_work_) {
    ++too_large_;
    return;
  }
  ++offered_;
  ++index_;
}

void Shortlist::enter_family(const Key& k, const PlanPoint& p, const Estimate& e) {
  std::vector<Entry>& f = family_[{p.schedule, p.virtual_stages}];
  // The search can offer one plan twice (two of its DPs, or the grid and a DP, agreeing):
  // the family's two places go to two strategies.
  for (const Entry& x : f)
    if (x.plan.point == p) return;
  const auto at = std::upper_bound(f.begin(), f.end(), k,
                                   [](const Key& a, const Entry& x) { return before(a, x.key); });
  if (static_cast<size_t>(at - f.begin()) >= kPerFamily) return;
  f.insert(at, {k, {p, e}});
  if (f.size() > kPerFamily) f.pop_back();
}

void Shortlist::enter_kept(const Key& k, const PlanPoint& p, const Estimate& e) {
  const auto later = [](const Entry& a, const Entry& b) { return before(a.key, b.key); };
  if (kept_.size() < keep_) {
    kept_.push_back({k, {p, e}});
    std::push_heap(kept_.begin(), kept_.end(), later);
    return;
  }
  if (kept_.empty() || !before(k, kept_.front().key)) return;
  std::pop_heap(kept_.begin(), kept_.end(), later);
  // Assigning into the evicted entry reuses its stage list's storage.
  Entry& slot = kept_.back();
  slot.key = k;
  slot.plan.point = p;
  slot.plan.estimate = e;
  std::push_heap(kept_.begin(), kept_.end(), later);
}

void Shortlist::enter_front(const Key& k, const PlanPoint& p, const Estimate& e) {
  // Offered last, the plan comes after every member of no greater time. The front's memory
  // strictly decreases along it, so the member just before it has the least of those.
  const auto pos = static_cast<size_t>(
      std::upper_bound(front_.begin(), front_.end(), k.time,
                       [](double t, const Entry& x) { return t < x.key.time; }) -
      front_.begin());
  if (pos > 0 && front_[pos - 1].key.memory <= k.memory) return;
  // It displaces the members after it that need at least as much memory: a run from pos.
  size_t end = pos;
  while (end < front_.size() && front_[end].key.memory >= k.memory) ++end;
  const auto at = front_.begin() + static_cast<std::ptrdiff_t>(pos);
  if (end == pos) {
    front_.insert(at, {k, {p, e}});
    return;
  }
  at->key = k;
  at->plan.point = p;
  at->plan.estimate = e;
  front_.erase(at + 1, front_.begin() + static_cast<std::ptrdiff_t>(end));
}

std::vector<Costed> Shortlist::in_order(std::vector<const Entry*> order) {
  std::sort(order.begin(), order.end(),
            [](const Entry* a, const Entry* b) { return before(a->key, b->key); });
  std::vector<Costed> out;
  out.reserve(order.size());
  for (const Entry* x : order) out.push_back(x->plan);
  return out;
}

std::vector<Costed> Shortlist::best() const {
  std::vector<const Entry*> order;
  for (const Entry& x : kept_) order.push_back(&x);
  return in_order(std::move(order));
}

std::vector<Costed> Shortlist::families() const {
  std::vector<const Entry*> order;
  for (const auto& [family, entries] : family_)
    for (const Entry& x : entries) order.push_back(&x);
  return in_order(std::move(order));
}

std::vector<Costed> Shortlist::front() const {
  std::vector<Costed> out;
  out.reserve(front_.size());
  for (const Entry& x : front_) out.push_back(x.plan);
  return out;
}

}  // namespace pipesim::planner
