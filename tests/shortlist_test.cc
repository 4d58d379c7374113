// The planner's Shortlist against what phase 2 used to compute from the whole pool: the
// pool without the plans too large to simulate, stable-sorted (fitting plans by time, then
// the rest by memory), and its time/memory front (each fitting plan that needs less memory
// than every fitting plan before it in that order).
#include "planner/shortlist.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

namespace pipesim::planner {
namespace {

// A plan is named by its micro-batch field (its index in the pool).
std::vector<int64_t> names(const std::vector<Costed>& v) {
  std::vector<int64_t> out;
  for (const Costed& c : v) out.push_back(c.point.micro_batch);
  return out;
}

// Few distinct times and memories, so that ties (kept in pool order) are common.
std::vector<Costed> random_pool(unsigned seed, int n) {
  std::mt19937 rng(seed);
  std::vector<Costed> pool;
  for (int i = 0; i < n; ++i) {
    Costed c;
    c.point.micro_batch = i;
    c.point.stages.resize(rng() % 5 + 1);
    c.estimate.fits = rng() % 10 < 7;
    c.estimate.iteration_s = static_cast<double>(rng() % 40) * 0.25;
    c.estimate.peak_memory = static_cast<int64_t>(rng() % 30) << 30;
    c.estimate.work = static_cast<double>(rng() % 100);
    pool.push_back(c);
  }
  return pool;
}

struct Reference {
  std::vector<Costed> order, front;
  int too_large = 0;
};

Reference reference(std::vector<Costed> pool, double max_work) {
  Reference r;
  std::erase_if(pool, [&](const Costed& c) {
    const bool skip = c.estimate.work > max_work;
    r.too_large += skip;
    return skip;
  });
  std::stable_sort(pool.begin(), pool.end(), [](const Costed& a, const Costed& b) {
    if (a.estimate.fits != b.estimate.fits) return a.estimate.fits;
    if (!a.estimate.fits) return a.estimate.peak_memory < b.estimate.peak_memory;
    return a.estimate.iteration_s < b.estimate.iteration_s;
  });
  int64_t least = std::numeric_limits<int64_t>::max();
  for (const Costed& c : pool) {
    if (!c.estimate.fits || c.estimate.peak_memory >= least) continue;
    least = c.estimate.peak_memory;
    r.front.push_back(c);
  }
  r.order = std::move(pool);
  return r;
}

TEST(Shortlist, KeepsTheFirstOfPhaseTwosOrderAndTheWholeFront) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const std::vector<Costed> pool = random_pool(seed, 600);
    for (const double max_work : {100.0, 80.0}) {
      const Reference ref = reference(pool, max_work);
      for (const size_t keep : {size_t{0}, size_t{1}, size_t{7}, size_t{64}, size_t{10'000}}) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " keep " << keep);
        Shortlist list(keep, max_work);
        for (const Costed& c : pool) list.offer(c.point, c.estimate);
        const std::vector<Costed> order(
            ref.order.begin(),
            ref.order.begin() + static_cast<std::ptrdiff_t>(std::min(keep, ref.order.size())));
        EXPECT_EQ(names(list.best()), names(order));
        EXPECT_EQ(names(list.front()), names(ref.front));
        EXPECT_EQ(list.too_large(), ref.too_large);
        EXPECT_EQ(list.complete(), keep >= ref.order.size());
        // What is kept is the plan itself, stage list included.
        for (const Costed& c : list.best())
          EXPECT_EQ(c.point.stages.size(),
                    pool[static_cast<size_t>(c.point.micro_batch)].point.stages.size());
      }
    }
  }
}

// Plans 0-3 at 3, 1, 2, 1 s with 5, 9, 4, 9 GiB, all fitting, offered in that order.
void offer_hand_worked(Shortlist& list) {
  const double times[] = {3, 1, 2, 1};
  const int64_t gib[] = {5, 9, 4, 9};
  for (int i = 0; i < 4; ++i) {
    PlanPoint p;
    p.micro_batch = i;
    Estimate e;
    e.iteration_s = times[i];
    e.peak_memory = gib[i] << 30;
    list.offer(p, e);
  }
}

// Hand-worked: times 3, 1, 2, 1 s with memories 5, 9, 4, 9 GiB (all fit). Order: the two
// 1 s plans in pool order (1, 3), then 2 (2 s), then 0 (3 s). Front: 1 (9 GiB), then 2
// (4 GiB); 3 ties 1's time after it without less memory, 0 needs more than 2.
TEST(Shortlist, HandWorkedFront) {
  Shortlist list(2, 1.0);
  offer_hand_worked(list);
  EXPECT_EQ(names(list.best()), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(names(list.front()), (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(list.complete());
}

// Hand-worked, lean plans (offer_lean: they also fit a ZeRO level lower): the pool of
// HandWorkedFront, then lean plan 4 at 1.5 s with 3 GiB, lean plan 5 at 0.5 s but out of
// memory, and lean plan 6 at 2 s with 4 GiB. Plan 4 enters the front between 1 (1 s) and
// 2 (2 s, 4 GiB), which it displaces (it needs less memory and less time); 5 does not fit;
// 6 ties 2's place without less memory than 4. The ranking, the families and complete()
// see the four offered plans only.
TEST(Shortlist, LeanPlansEnterTheFrontAlone) {
  Shortlist list(8, 1.0);
  offer_hand_worked(list);
  const auto lean = [&](int name, double time, int64_t memory, bool fits) {
    PlanPoint p;
    p.micro_batch = name;
    p.zero = 1;
    Estimate e;
    e.iteration_s = time;
    e.peak_memory = memory << 30;
    e.fits = fits;
    list.offer_lean(p, e);
  };
  lean(4, 1.5, 3, true);
  lean(5, 0.5, 1, false);
  lean(6, 2, 4, true);
  EXPECT_EQ(names(list.front()), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(names(list.best()), (std::vector<int64_t>{1, 3, 2, 0}));
  EXPECT_EQ(names(list.families()), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(list.complete());
}

TEST(Shortlist, AFamilysTwoPlacesGoToTwoDistinctPlans) {
  // One schedule family (dapple, one chunk), offered plan 0 at 1 s, the same plan 0 again
  // at 1 s (the search can offer a plan twice), then plan 1 at 2 s and plan 2 at 3 s. The
  // family's two places: plans 0 and 1; the repeat of 0 takes none.
  Shortlist list(8, 1.0);
  const int plan[] = {0, 0, 1, 2};
  const double times[] = {1, 1, 2, 3};
  for (int i = 0; i < 4; ++i) {
    PlanPoint p;
    p.micro_batch = plan[i];
    Estimate e;
    e.iteration_s = times[i];
    list.offer(p, e);
  }
  EXPECT_EQ(names(list.families()), (std::vector<int64_t>{0, 1}));
}

// The search skips a plan when wanted() says that, taking at least a lower bound on its
// time, it could enter neither the kept order, the front nor its family (counting it with
// passed() instead). Over random pools, each plan offered or offered lean at random, with
// a bound of 50-100 % of its time: a shortlist that skips those ends as one that was
// offered everything, and skips happen.
TEST(Shortlist, PlansItDoesNotWantChangeNothing) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::vector<Costed> pool = random_pool(seed, 600);
    std::mt19937 rng(seed + 100);
    for (Costed& c : pool) {
      c.point.schedule = rng() % 2 ? ScheduleKind::kDapple : ScheduleKind::kZb1p;
      c.point.virtual_stages = static_cast<int>(rng() % 2) + 1;
    }
    for (const size_t keep : {size_t{1}, size_t{7}, size_t{64}}) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " keep " << keep);
      Shortlist all(keep, 80.0), skipping(keep, 80.0);
      int skipped = 0;
      for (const Costed& c : pool) {
        const bool lean = rng() % 4 == 0;
        const Estimate& e = c.estimate;
        const double bound = e.iteration_s * (0.5 + 0.5 * static_cast<double>(rng() % 3) / 2);
        const bool wanted = skipping.wanted(e.fits, bound, e.peak_memory, e.work, c.point.schedule,
                                            c.point.virtual_stages, lean);
        // (The search asks may_keep_unfit first, without the memory.)
        if (!e.fits && !lean && wanted) {
          EXPECT_TRUE(skipping.may_keep_unfit(e.work));
        }
        for (Shortlist* list : {&all, &skipping}) {
          if (list == &skipping && !wanted) {
            ++skipped;
            if (!lean) list->passed(e.work);
          } else if (lean) {
            list->offer_lean(c.point, e);
          } else {
            list->offer(c.point, e);
          }
        }
      }
      EXPECT_GT(skipped, 100);
      EXPECT_EQ(names(skipping.best()), names(all.best()));
      EXPECT_EQ(names(skipping.front()), names(all.front()));
      EXPECT_EQ(names(skipping.families()), names(all.families()));
      EXPECT_EQ(skipping.too_large(), all.too_large());
      EXPECT_EQ(skipping.complete(), all.complete());
    }
  }
}

}  // namespace
}  // namespace pipesim::planner
