#include "sim/phases.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/units.h"

namespace pipesim {
namespace {

// Whether some member's step has no latency (a cluster written with `latency: 0`): a
// member's next step would start in the very moment its last one ends, with that one
// still on the link (its end queued after), so the steps would count two flows there
// where a phase or fold counts one.
bool zero_latency(const std::vector<const Route*>& routes) {
  return std::any_of(routes.begin(), routes.end(),
                     [](const Route* r) { return r->latency == Time::zero(); });
}

}  // namespace

std::optional<PhasePlan> plan_phase(const RingRoutes& ring, const std::vector<double>& capacity,
                                    std::vector<uint32_t>& scratch) {
  const std::vector<const Route*>& routes = ring.routes;
  const auto n = static_cast<uint32_t>(routes.size());
  if (n < 1 || zero_latency(routes)) return std::nullopt;
  const auto bandwidth = [&](LinkDirection h) { return capacity[static_cast<size_t>(h)]; };
  PhasePlan p;
  p.chunk = ring.chunk;
  p.steps = std::max<int64_t>(ring.steps, 1);
  p.latency = routes[0]->latency;
  bool same_latency = true;
  for (uint32_t m = 0; m < n; ++m) {
    same_latency = same_latency && routes[m]->latency == p.latency;
    for (LinkDirection h : routes[m]->hops) {
      if (scratch[static_cast<size_t>(h)]++ == 0) p.links.push_back(h);
    }
  }
  // Progressive filling among the members' flows alone first freezes the links of least
  // capacity per flow, at rate = capacity / flows. Every member must be frozen there, and
  // bit for bit at that rate: its tightest link is crossed by it alone (a shared one would
  // see its share recomputed after others froze, to rounding).
  double rate = std::numeric_limits<double>::infinity();
  for (LinkDirection h : p.links)
    rate = std::min(rate, bandwidth(h) / scratch[static_cast<size_t>(h)]);
  bool every = same_latency;
  for (uint32_t m = 0; m < n && every; ++m) {
    bool tight = std::isinf(rate);  // no finite link at all: every step is its latency
    for (LinkDirection h : routes[m]->hops) {
      tight = tight || (scratch[static_cast<size_t>(h)] == 1 && bandwidth(h) == rate);
    }
    every = tight;
  }
  // A tight link that two members share freezes them to rounding only.
  for (LinkDirection h : p.links) {
    const uint32_t k = scratch[static_cast<size_t>(h)];
    if (k > 1 && bandwidth(h) / k == rate) every = false;
  }
  p.count.reserve(p.links.size());
  for (LinkDirection h : p.links) {
    p.count.push_back(scratch[static_cast<size_t>(h)]);
    scratch[static_cast<size_t>(h)] = 0;
  }
  if (!every) return std::nullopt;
  p.rate = rate;
  p.transfer =
      p.chunk > 0 && std::isfinite(rate) ? serialization_time(p.chunk, rate) : Time::zero();
  return p;
}

std::optional<uint32_t> fold_period(const RingRoutes& ring, const std::vector<double>& capacity,
                                    std::vector<uint32_t>& scratch) {
  const std::vector<const Route*>& routes = ring.routes;
  const auto n = static_cast<uint32_t>(routes.size());
  if (n < 4 || zero_latency(routes)) return std::nullopt;
  bool own = true;  // no link direction under two members' steps
  for (uint32_t m = 0; m < n; ++m) {
    for (LinkDirection h : routes[m]->hops) own = own && scratch[static_cast<size_t>(h)]++ == 0;
  }
  for (uint32_t m = 0; m < n; ++m) {
    for (LinkDirection h : routes[m]->hops) scratch[static_cast<size_t>(h)] = 0;
  }
  if (!own) return std::nullopt;
  const auto alike = [&](const Route& a, const Route& b) {
    if (a.latency != b.latency || a.hops.size() != b.hops.size()) return false;
    for (size_t i = 0; i < a.hops.size(); ++i) {
      if (capacity[static_cast<size_t>(a.hops[i])] != capacity[static_cast<size_t>(b.hops[i])])
        return false;
    }
    return true;
  };
  for (uint32_t p = 2; p <= n / 2; ++p) {
    if (n % p != 0) continue;
    bool periodic = true;
    for (uint32_t m = 0; m + p < n && periodic; ++m)
      periodic = alike(*routes[m], *routes[m + p]);
    if (periodic) return p;
  }
  return std::nullopt;
}

PhasePosition phase_position(const PhasePlan& plan, Time start, Time now) {
  PhasePosition at;
  const Time period = plan.latency + plan.transfer;
  const Time elapsed = now - start;
  if (period == Time::zero() || elapsed >= plan.duration()) {
    at.over = true;
    return at;
  }
  at.step = elapsed.ps_count() / period.ps_count();
  const Time step_start = start + period * at.step;
  at.since = step_start + plan.latency;
  at.sending = now >= at.since;
  at.finish = at.since + plan.transfer;
  return at;
}

}  // namespace pipesim
