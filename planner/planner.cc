#include "planner/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "core/error.h"
#include "core/units.h"
#include "parallel/distributed.h"
#include "planner/baseline_runs.h"
#include "planner/bound.h"
#include "planner/exhaustive.h"
#include "planner/judge.h"
#include "planner/refine.h"
#include "planner/search.h"
#include "scenario/device_speed.h"
#include "scenario/setup.h"

namespace pipesim {

double checked_time_limit(double seconds, const std::string& key, const Location& where) {
  if (!std::isfinite(seconds) || seconds <= 0)
    throw InputError(
        fmt::format("the time limit must be a positive, finite duration (got {})", seconds),
        "more than 0 s, e.g. 60s; leave it out for no limit", key, where);
  return seconds;
}
namespace {

// Which of a front of n plans (fastest first, leanest last) phase 2 simulates, in the order
// it lists them: at most 16, spread evenly from the fastest to the leanest (a long front's
// lean end is the answer for a tight GPU), the two ends first, then each gap's middle, so
// that a simulation budget, which cuts the list from its end, leaves the front spread.
std::vector<size_t> front_picks(size_t n) {
  constexpr size_t kPlans = 16;
  std::vector<size_t> at;  // the evenly spread members
  for (size_t i = 0; i < std::min(n, kPlans); ++i)
    at.push_back(n <= kPlans ? i : (i * (n - 1) + (kPlans - 1) / 2) / (kPlans - 1));
  if (at.size() < 3) return at;
  std::vector<size_t> out{at.front(), at.back()};
  std::deque<std::pair<size_t, size_t>> gaps{{0, at.size() - 1}};
  while (!gaps.empty()) {
    const auto [lo, hi] = gaps.front();
    gaps.pop_front();
    if (hi - lo < 2) continue;
    const size_t mid = (lo + hi) / 2;
    out.push_back(at[mid]);
    gaps.emplace_back(lo, mid);
    gaps.emplace_back(mid, hi);
  }
  return out;
}

using planner::Clock;
using planner::Costed;
using planner::micro_batch_sizes;
using planner::PlanPoint;
using planner::since;
using planner::tensor_degrees;

// The share of --time-limit phase 1 (the analytic search) may take.
constexpr double kAnalyticShare = 0.4;

// Per-stage placement variants are tried on pipelines up to this deep.
constexpr size_t kMaxPerStagePositions = 16;

// A plan whose simulation costs at most this share of PlanOptions::max_sim_work (about a
// quarter of a second) is cheap to simulate.
constexpr double kCheapShare = 1.0 / 16;

class Planner {
 public:
  Planner(const Scenario& base, const PlanOptions& options) : opt_(options), base_(base) {
    for (const std::string& key : opt_.fix) {
      if (std::find_if(std::begin(kFixable), std::end(kFixable),
                       [&](const char* k) { return key == k; }) == std::end(kFixable)) {
        std::string allowed;
        for (const char* k : kFixable)
          allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", k);
        throw InputError(fmt::format("cannot fix '{}'", key), allowed, "--fix", {"<command line>"});
      }
    }
  }

  // Whether `key` (kFixable) keeps the scenario's value.
  bool fixed(std::string_view key) const {
    return std::find(opt_.fix.begin(), opt_.fix.end(), key) != opt_.fix.end();
  }
  // Whether a plan keeps every fixed dimension at the scenario's value.
  bool allowed(const PlanPoint& p) const {
    const Strategy& st = base_.strategy;
    return (!fixed("training.micro_batch") || p.micro_batch == base_.training.micro_batch) &&
           (!fixed("strategy.schedule") || p.schedule == st.schedule) &&
           (!fixed("strategy.pipeline") || p.positions() == st.positions()) &&
           (!fixed("strategy.virtual_stages") || p.virtual_stages == st.virtual_stages) &&
           (!fixed("strategy.data") || p.data == st.data) &&
           (!fixed("strategy.tensor") || p.tensor == st.tensor) &&
           (!fixed("strategy.context") || p.context == st.context) &&
           (!fixed("strategy.expert") || p.expert == st.expert) &&
           (!fixed("strategy.zero") || p.zero == st.zero) &&
           (!fixed("strategy.recompute") || p.recompute == st.recompute);
  }

  // The smallest GPU memory of the cluster.
  int64_t capacity() const {
    int64_t least = 0;
    for (int d = 0; d < base_.cluster.num_devices(); ++d) {
      const int64_t m = base_.cluster.device(d).gpu.memory_bytes;
      least = d == 0 ? m : std::min(least, m);
    }
    return least;
  }

  Plan run() {
    const auto t0 = opt_.time_limit_s > 0 ? opt_.start : Clock::now();
    judge_.start_clock(t0);
    if (opt_.time_limit_s > 0)  // phase 1 takes at most this share; simulations the rest
      analytic_deadline_ = after(t0, kAnalyticShare * opt_.time_limit_s);
    for (const std::string& text : opt_.compare)
      planner::compared_scenario(base_, text);  // refused before the search
    Plan result;
    std::vector<Costed> chosen;
    chosen = analytic_choice(result, t0);
    within_budget(chosen, result);
    if (opt_.analytic_only) {
      result.wall_s = since(t0);
      return result;
    }
    std::vector<std::optional<Candidate>> sims = judge_.simulate_all(chosen, result);
    std::vector<Candidate> done;
    for (auto& c : sims)
      if (c) done.push_back(std::move(*c));
    // (`done` is the same on every rank; each rank's own clock is not.)
    if (done.empty() && opt_.time_limit_s > 0 && !chosen.empty())
      done.push_back(judge_.estimated_only(chosen[0]));
    refine(chosen, done, result);
    if (opt_.baselines) {
      // The baselines' plans compete too: the planner never recommends less than they do.
      result.baselines = planner::simulate_baselines(base_, judge_, opt_.max_sim_work, t0);
      std::set<std::string> have;
      for (const Candidate& c : done) have.insert(judge_.key_of(c.point));
      for (const Baseline& b : result.baselines) {
        if (b.result && allowed(b.result->point) &&
            have.insert(judge_.key_of(b.result->point)).second)
          done.push_back(*b.result);
      }
    }
    if (opt_.exhaustive) exhaustive(done, result);
    result.simulated = static_cast<int>(std::count_if(
        done.begin(), done.end(), [](const Candidate& c) { return !c.estimated_only; }));
    if (!done.empty() &&
        std::all_of(done.begin(), done.end(), [](const Candidate& c) { return c.estimated_only; }))
      result.warnings.push_back(
          "the time limit stopped even the best estimate's simulation: the plan shown is the "
          "estimate's (estimated_only), not simulated; give more time to check it");
    if (DeviceSpeed(base_).uniform())
      result.lower_bound_s = checked_bound(done, result);
    else
      mixed_speeds(result);
    result.compared = planner::simulate_compared(base_, judge_, opt_.compare, done);
    judge_.finish(done, result);
    result.wall_s = since(t0);
    return result;
  }

 private:
  // The space's lower bound, checked against every simulated plan that fits: one faster
  // would be a fault of the bound's reasoning (planner/bound.h), said, never hidden.
  double checked_bound(const std::vector<Candidate>& done, Plan& result) const {
    double bound = std::isfinite(space_bound_) ? space_bound_ : 0.0;
    for (const Candidate& c : done) {
      if (c.fits() && !c.estimated_only && c.iteration_s < bound * (1 - 1e-9)) {
        result.warnings.push_back(fmt::format(
            "a simulated plan ({:.6g} s) is faster than the lower bound ({:.6g} s); the bound "
            "is lowered to it (please report this scenario)",
            c.iteration_s, bound));
        bound = c.iteration_s;
      }
    }
    return bound;
  }

  // Data copies and tensor degree of a point of the space.
  struct Widths {
    int data, tensor, context = 1, expert = 1;
  };

  // Every micro-batch size, tensor degree, data degree and schedule choice (with each of
  // its memory levels) of the space, with the cost model of that micro-batch and tensor
  // degree: f(cm, choice, widths, b, M) returns whether to go on to the choice's next
  // memory level. The analytic and the exhaustive phases walk the same space.
  template <typename F>
  void for_each_choice(F&& f) {
    const int N = base_.cluster.num_devices();
    const Strategy& fix = base_.strategy;
    for (const int64_t b : micro_batch_sizes(base_)) {
      if (halted_) return;
      if (fixed("training.micro_batch") && b != base_.training.micro_batch) continue;
      const Scenario& sc = judge_.at_micro_batch(b);
      const bool moe = std::any_of(sc.model.layers.begin(), sc.model.layers.end(),
                                   [](const Layer& l) { return l.moe.has_value(); });
      for (const int t : tensor_degrees(sc)) {
        if (halted_) return;
        if (fixed("strategy.tensor") && t != fix.tensor) continue;
        for (const int cp : planner::context_degrees(sc)) {
          if (fixed("strategy.context") && cp != fix.context) continue;
          for (const int ep : planner::expert_degrees(sc)) {
            if (fixed("strategy.expert") && ep != fix.expert) continue;
            planner::CostModel cm(sc, t, net_.get(), cp, ep, fix.expert_tensor);
            cm.keep_free(opt_.headroom);
            // Asynchronous iterations are steady-state gaps: no bound (planner/bound.h).
            space_bound_ =
                std::min(space_bound_, is_async(base_.strategy.schedule)
                                           ? 0.0
                                           : planner::work_bound(cm, cp, N, optimizer_s_));
            for (int d = 1; d * t * cp <= N; ++d) {
              if (sc.training.global_batch % (b * d) != 0) continue;
              if (fixed("strategy.data") && d != fix.data) continue;
              // Expert (x expert-tensor) ranks fold tensor x data x context.
              if ((d * cp * t) % (ep * fix.expert_tensor) != 0) continue;
              const int64_t M = sc.training.global_batch / (b * d);
              for (auto choice : planner::schedule_choices(base_)) {
                if ((cp > 1 || ep * fix.expert_tensor > 1) && is_async(choice.kind)) continue;
                if (fixed("strategy.schedule") && choice.kind != fix.schedule) continue;
                if (fixed("strategy.recompute") && choice.recompute != fix.recompute) continue;
                choice.context = cp;
                choice.expert = ep;
                choice.expert_tensor = fix.expert_tensor;
                for (const planner::MemoryLevel& level : planner::memory_levels(base_, t)) {
                  // MoE layers under tensor parallelism need sequence parallelism; ZeRO-2/3
                  // with expert parallelism is not modelled.
                  if (moe && t > 1 && !level.sequence_parallel) continue;
                  if (ep * fix.expert_tensor > 1 && level.zero >= 2) continue;
                  if (fixed("strategy.zero") && level.zero != fix.zero) continue;
                  choice.zero = level.zero;
                  choice.zero_fixed = fixed("strategy.zero");
                  choice.sequence_parallel = level.sequence_parallel;
                  // The levels up to ZeRO-1 with SP (the distributed optimizer most runs
                  // use) are always searched: where memory bounds nothing, what they add goes
                  // to the time/memory front (Shortlist::offer_lean). ZeRO-2 and 3 only where
                  // memory bounds the levels below.
                  const bool zero1_done = level.zero >= 1 && (level.sequence_parallel || t == 1);
                  if (!f(cm, choice, Widths{d, t, cp, ep}, b, M) && zero1_done) break;
                }
              }
            }
          }
        }
      }
    }
  }

  // Phase 1 and phase 2's list. The search keeps the first plans of phase 2's order and the
  // front (planner/shortlist.h); in the rare case that duplicates and plans zb-v cannot
  // order use up the kept ones, it runs again keeping every plan.
  std::vector<Costed> analytic_choice(Plan& result, Clock::time_point t0) {
    const size_t want = opt_.simulate > 0 ? static_cast<size_t>(opt_.simulate)
                                          : std::max<size_t>(2 * static_cast<size_t>(opt_.top), 24);
    for (size_t keep = 2 * want + 64;; keep = std::numeric_limits<size_t>::max()) {
      const planner::Shortlist list = analytic_phase(result, keep);
      result.analytic_s = since(t0);
      judge_.progress(
          fmt::format("costed {} strategies in {:.2f} s", result.explored, result.analytic_s));
      result.too_large = list.too_large();
      if (std::optional<std::vector<Costed>> chosen = choose(list, want)) return *chosen;
    }
  }

  planner::Shortlist analytic_phase(Plan& result, size_t keep) {
    planner::Shortlist list(keep, opt_.max_sim_work);
    planner::SearchStats stats;
    const int N = base_.cluster.num_devices();
    // The uniform grid of the current micro-batch, tensor and data degree.
    std::unique_ptr<planner::UniformGrid> grid;
    std::tuple<int64_t, int, int, int, int> grid_of{0, 0, 0, 0, 0};
    for_each_choice([&](const planner::CostModel& cm, const planner::ScheduleChoice& choice,
                        Widths w, int64_t b, int64_t M) {
      // One rank only: ranks must cost the same list (each has its own clock).
      if (stats.costed > 0 && job_ranks().size == 1 && passed(analytic_deadline_)) {
        halted_ = true;  // the rest of the space is not costed
        return false;
      }
      if (!grid || grid_of != std::tuple{b, w.tensor, w.data, w.context, w.expert}) {
        grid = std::make_unique<planner::UniformGrid>(cm, w.data, M);
        grid_of = {b, w.tensor, w.data, w.context, w.expert};
      }
      stats.memory_bound = false;
      planner::search(cm, choice, w.data, b, M, N / (w.data * w.tensor * w.context), stats, *grid,
                      list);
      return stats.memory_bound;
    });
    result.explored = stats.costed;
    result.bounded = stats.bounded;
    if (halted_) {
      result.timed_out = true;
      result.warnings.push_back(fmt::format(
          "the time limit stopped the analytic search after {} strategies, part of the space "
          "({:.0f} % of the limit is the search's)",
          stats.costed, 100 * kAnalyticShare));
      halted_ = false;   // the exhaustive walk goes over the same loops
      space_bound_ = 0;  // the work bounds of the part not costed are unknown: no bound
    }
    return list;
  }

  // Phase 2's list: the best estimates that fit (`want` distinct ones), the estimated
  // time/memory front, and the placement variants of the best few; distinct strategies
  // only. Empty when `list` kept too few of the best.
  std::optional<std::vector<Costed>> choose(const planner::Shortlist& list, size_t want) {
    std::vector<Costed> out;
    std::set<std::string> seen;
    // A plan's data-parallel twin (planner::data_twin) stands for it: the same work per GPU,
    // a fraction of the simulation. (Only where every layer is priced at a replica's
    // samples, Layer::at_degrees, and at the twin's micro-batch, micro_batch_sizes.)
    const auto& layers = base_.model.layers;
    const std::vector<int64_t> sizes =
        std::all_of(layers.begin(), layers.end(),
                    [](const Layer& l) { return l.tensor_retime || l.sample_retime; })
            ? micro_batch_sizes(base_)
            : std::vector<int64_t>{};
    auto take = [&](const Costed& c) {
      Costed pick = twin_of(c, sizes);
      if (!judge_.orderable(pick.point)) pick = c;  // (a twin that cannot run: the plan)
      if (allowed(pick.point) && seen.insert(judge_.key_of(pick.point)).second &&
          judge_.orderable(pick.point))
        out.push_back(pick);
    };
    const std::vector<Costed> best = list.best();
    for (size_t i = 0; i < best.size() && out.size() < want; ++i) take(best[i]);
    if (out.size() < want && !list.complete()) return std::nullopt;
    // Estimated front of iteration time vs peak memory (by time, keep strictly smaller
    // memory): before the families, as the simulation budget cuts the list from its end and
    // the front is the plan's answer on the memory axis.
    const std::vector<Costed> front = list.front();
    for (const size_t i : front_picks(front.size())) take(front[i]);
    // The best two estimates of every schedule (with its chunk count) too: the estimate's
    // error differs by schedule (interleaving's fill and drain, zero-bubble's W filling), so
    // the simulator sees each family's best however the estimate ranks it.
    for (const Costed& c : list.families()) take(c);
    // Placement variants of the best few: the same stages on other GPUs, first under one
    // policy for every stage (DAPPLE's three, planner::placement_variants), then, for the best two,
    // with one stage at a time under another policy than the rest (placement per stage). Only
    // variants that really move a GPU are kept.
    constexpr PlacementPolicy kPolicies[] = {PlacementPolicy::kAppendFirst,
                                             PlacementPolicy::kFreshFirst,
                                             PlacementPolicy::kScatterFirst};
    const size_t variants = std::min<size_t>(out.size(), 8);
    for (size_t i = 0; i < variants; ++i) {
      const Costed base = out[i];
      const auto P = static_cast<size_t>(base.point.positions());
      std::set<std::vector<std::vector<std::vector<int>>>> placements;
      auto variant = [&](const std::vector<PlacementPolicy>& policies) {
        Costed c = base;
        c.point.placement = policies.front();
        c.point.stage_placement.clear();
        if (std::any_of(policies.begin(), policies.end(),
                        [&](PlacementPolicy p) { return p != policies.front(); }))
          c.point.stage_placement = policies;
        const Placement devices = c.point.devices(base_.cluster);
        if (!placements.insert(devices).second) return;
        c.estimate = placed_estimate(c.point, devices);
        take(c);
      };
      for (auto& [n, devices] : planner::placement_variants(base.point, base_.cluster, false)) {
        placements.insert(devices);
        const planner::Estimate e = placed_estimate(n, devices);
        take({std::move(n), e});
      }
      if (i >= 2 || P < 2 || P > kMaxPerStagePositions) continue;
      for (size_t q = 0; q < P; ++q) {
        for (PlacementPolicy pol : kPolicies) {
          std::vector<PlacementPolicy> policies(P, base.point.placement);
          policies[q] = pol;
          variant(policies);
        }
      }
    }
    return out;
  }

  // `c` or, where `c` is not cheap to simulate, the search prices its data-parallel twin
  // (a micro-batch size it tries) and the user's fixed keys allow it, the twin on its own
  // placement (a cheap plan keeps its placement, which the twin's does not repeat: a
  // stage's replicas side by side).
  Costed twin_of(const Costed& c, const std::vector<int64_t>& sizes) {
    if (c.estimate.work <= kCheapShare * opt_.max_sim_work) return c;
    const PlanPoint twin = planner::data_twin(c.point);
    if (twin == c.point || !allowed(twin) ||
        std::find(sizes.begin(), sizes.end(), twin.micro_batch) == sizes.end())
      return c;
    return {twin, placed_estimate(twin, twin.devices(base_.cluster))};
  }

  // A plan's estimate on its real placement (phase 1 costs every plan placed contiguously).
  planner::Estimate placed_estimate(const PlanPoint& p, const Placement& d) {
    std::unique_ptr<planner::CostModel>& cm =
        models_[{p.micro_batch, p.tensor, p.context, p.expert, p.expert_tensor}];
    if (!cm) {
      cm = std::make_unique<planner::CostModel>(judge_.at_micro_batch(p.micro_batch), p.tensor,
                                                net_.get(), p.context, p.expert, p.expert_tensor);
      cm->keep_free(opt_.headroom);
    }
    const planner::Estimate e =
        cm->estimate(p, base_.training.global_batch / (p.micro_batch * p.data), &d);
    return e;
  }

  // Phase 2's list within the budget of predicted simulation work, in its order: a plan
  // whose work would pass what is left is left out, the cheaper ones after it still run
  // (the best estimate always does). On large clusters each simulation costs seconds, so
  // fewer of the best are replayed instead of all of them with no time left, and one dear
  // plan (a front's leanest, say) does not take the rest of the list with it.
  void within_budget(std::vector<Costed>& chosen, Plan& result) const {
    double work = 0;
    size_t kept = 0;
    for (size_t i = 0; i < chosen.size(); ++i) {
      const double w = chosen[i].estimate.work;
      if (i > 0 && work + w > opt_.sim_budget) continue;
      work += w;
      if (kept != i) chosen[kept] = std::move(chosen[i]);
      ++kept;
    }
    result.over_budget = static_cast<int>(chosen.size() - kept);
    chosen.resize(kept);
  }

  // --exhaustive: branch and bound over the whole space from the best simulated so far.
  void exhaustive(std::vector<Candidate>& done, Plan& result) {
    double best = std::numeric_limits<double>::infinity();
    std::set<std::string> seen;
    for (const Candidate& c : done) {
      if (c.estimated_only) continue;  // not simulated: neither a time to beat nor seen
      seen.insert(judge_.key_of(c.point));
      if (c.fits()) best = std::min(best, c.iteration_s);
    }
    // The best already takes the work bound: no plan of the space can be faster.
    if (opt_.prune && space_bound_ >= best * (1 - opt_.tolerance) * (1 - 1e-9)) {
      judge_.progress("exhaustive: the best plan reaches the lower bound; no plan can be faster");
      result.exhaustive = true;
      result.tolerance = opt_.tolerance;
      return;
    }
    planner::Exhaustive walk(judge_, base_.cluster, opt_, best, std::move(seen), opt_.prune);
    walk.only([this](const PlanPoint& p) { return allowed(p); });
    const int N = base_.cluster.num_devices();
    for_each_choice([&](const planner::CostModel& cm, const planner::ScheduleChoice& choice,
                        Widths w, int64_t b, int64_t M) {
      walk.offer(cm, choice, w.data, w.tensor, b, M, N);
      return true;
    });
    const planner::Exhaustive::Outcome o = walk.solve(done, result);
    result.explored += o.bounded;
    result.exhaustive = o.complete;
    result.tolerance = opt_.tolerance;
    if (std::isfinite(o.lower_bound)) space_bound_ = std::max(space_bound_, o.lower_bound);
  }

  // Phase 3 (planner/refine.h): rounds of the unseen neighbours of the best few simulated
  // plans that fit, each round simulated like phase 2, while a round brings a new plan into
  // the best few; its simulations take at most a quarter of the budget, each a small part.
  void refine(const std::vector<Costed>& chosen, std::vector<Candidate>& done, Plan& result) {
    constexpr size_t kRefineFrom = 4;
    constexpr int kRefineRounds = 8;
    constexpr double kRefineFloor = 1e6;  // about 0.2-0.7 s of simulation
    std::set<std::string> seen;
    for (const Costed& c : chosen) seen.insert(judge_.key_of(c.point));
    // The best few that fit, and the best of every schedule (with its chunk count) besides:
    // the estimate may have ranked a whole family too low for any of it to be near the top.
    auto best = [&] {  // indices into `done`, which only grows
      std::vector<size_t> all;
      for (size_t i = 0; i < done.size(); ++i)
        if (done[i].fits() && !done[i].estimated_only) all.push_back(i);
      std::sort(all.begin(), all.end(),
                [&](size_t a, size_t b) { return planner::Judge::ranks_before(done[a], done[b]); });
      std::vector<size_t> out;
      std::set<std::pair<ScheduleKind, int>> families;
      for (const size_t i : all) {
        const PlanPoint& p = done[i].point;
        if (families.insert({p.schedule, p.virtual_stages}).second || out.size() < kRefineFrom)
          out.push_back(i);
      }
      return out;
    };
    // At most twice phase 2's work (and a quarter of the budget): the search refines, it
    // does not replace phase 2.
    double phase2 = 0;
    for (const Costed& c : chosen) phase2 += c.estimate.work;
    const double budget = std::min(opt_.sim_budget / 4, std::max(2 * phase2, kRefineFloor));
    double spent = 0;
    int simulated = 0, rounds = 0;
    for (; rounds < kRefineRounds; ++rounds) {
      if (judge_.past_deadline()) break;
      const std::vector<size_t> from = best();
      if (from.empty()) break;
      std::vector<Costed> next;
      for (const size_t i : from) {
        if (judge_.past_deadline()) break;  // a neighbour's estimate takes long at scale
        for (const PlanPoint& m : planner::neighbours(done[i].point, base_.training.global_batch)) {
          // Each under its own placement and every policy: a new cut or replica count often
          // wants its stages on other servers.
          for (auto& [n, devices] : planner::placement_variants(m, base_.cluster, true)) {
            if (!allowed(n) || !seen.insert(judge_.key_of(n)).second || !judge_.orderable(n))
              continue;
            const planner::Estimate e = placed_estimate(n, devices);
            // Only plans cheap to simulate (about a quarter of a second each): on large
            // clusters the budget goes to phase 2's best estimates instead.
            if (!e.fits || e.work > kCheapShare * opt_.max_sim_work || spent + e.work > budget)
              continue;
            spent += e.work;
            next.push_back({std::move(n), e});
          }
        }
      }
      if (next.empty()) break;
      for (auto& c : judge_.simulate_all(next, result)) {
        if (c) done.push_back(std::move(*c));
      }
      simulated += static_cast<int>(next.size());
      // Stop where no neighbour made it into the best few.
      if (best() == from) {
        ++rounds;
        break;
      }
    }
    if (simulated > 0)
      judge_.progress(
          fmt::format("refined: {} neighbours simulated in {} rounds, best {:.1f} samples/s",
                      simulated, rounds, done[best().front()].throughput));
  }

  PlanOptions opt_;
  Scenario base_;
  // The network terms, the same at every micro-batch size and tensor degree.
  std::unique_ptr<planner::NetworkCosts> net_ = std::make_unique<planner::NetworkCosts>(base_);
  // The cost model of the scenario at a micro-batch size, by (micro-batch size, tensor,
  // context, expert, expert-tensor degree).
  std::map<std::tuple<int64_t, int, int, int, int>, std::unique_ptr<planner::CostModel>> models_;
  planner::Judge judge_{base_, opt_};
  // Every parameter's optimizer step once, and the least work bound of the space so far.
  double optimizer_s_ = planner::CostModel(base_, 1, net_.get())
                            .optimizer_time(0, static_cast<int>(base_.model.layers.size()) - 1);
  double space_bound_ = std::numeric_limits<double>::infinity();
  // Under a time limit: when phase 1 stops costing, and whether it has.
  // GPUs of different speeds (node_groups, slowdowns): the estimates and the bound price
  // every GPU as device 0's, so no bound is claimed and --exhaustive proves nothing; the
  // ranking stands on the simulations, which use each GPU's own speed (SPEC: said).
  static void mixed_speeds(Plan& result) {
    result.lower_bound_s = 0;
    result.exhaustive = false;
    result.warnings.push_back(
        "the GPUs differ in speed (node_groups or slowdowns): the estimates price every GPU as "
        "device 0's, so no lower bound is claimed and --exhaustive proves nothing; each plan "
        "is simulated at its GPUs' own speeds, and again with its layers split by them");
  }

  Deadline analytic_deadline_;
  bool halted_ = false;
};

}  // namespace

Plan plan(const std::string& file, const std::vector<Override>& overrides,
          const PlanOptions& options) {
  return plan(load_scenario(file, overrides), options);
}

Plan plan(const Scenario& scenario, const PlanOptions& options) {
  Planner planner(scenario, options);
  Plan p = planner.run();
  std::vector<std::string> said = scenario_warnings(scenario);
  if (scenario.strategy.offload_layers > 0)
    said.push_back(
        "strategy.offload_layers: the planner does not offload activations; its plans keep "
        "them on the GPU");
  said.insert(said.end(), p.warnings.begin(), p.warnings.end());
  p.warnings = std::move(said);
  p.headroom = options.headroom;
  p.fixed = options.fix;
  p.capacity_bytes = planner.capacity();
  for (std::string& w : memory_warnings(p)) p.warnings.push_back(std::move(w));
  return p;
}

}  // namespace pipesim
