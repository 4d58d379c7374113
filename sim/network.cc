#include "sim/network.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/checked.h"
#include "core/error.h"
#include "core/units.h"
#include "schedules/task_graph.h"

namespace pipesim {

namespace {
std::vector<double> direction_bandwidths(const Cluster& cluster) {
  std::vector<double> out(static_cast<size_t>(cluster.num_links()) * 2);
  for (size_t d = 0; d < out.size(); ++d)
    out[d] = cluster.direction_bandwidth(static_cast<LinkDirection>(d));
  return out;
}
}  // namespace

FlowNetwork::FlowNetwork(const Cluster& cluster, size_t max_flow_id, Filling filling,
                         size_t local_above)
    : FlowNetwork(direction_bandwidths(cluster), max_flow_id, filling, local_above) {}

FlowNetwork::FlowNetwork(const std::vector<double>& capacity, size_t max_flow_id,
                         Filling filling, size_t local_above)
    : links_(capacity.size()), filling_(filling), local_above_(local_above) {
  reserve_huge(slot_of_, max_flow_id);
  slot_of_.assign(max_flow_id, kNoSlot);
  for (size_t d = 0; d < links_.size(); ++d) {
    links_[d].capacity = capacity[d];
    links_[d].finite = std::isfinite(capacity[d]);
  }
}

double FlowNetwork::load(LinkDirection d) const {
  double sum = 0;
  for (uint32_t s : links_[static_cast<size_t>(d)].flows) sum += slots_[s].rate;
  return sum;
}

Time FlowNetwork::finish_time(const Flow& f, Time now) const {
  if (f.remaining <= 0 || std::isinf(f.rate)) return now;
  // Exact integer arithmetic while the flow still has all its (whole) bytes to send.
  if (f.exact && f.remaining < 9e18) {
    const auto bytes = static_cast<int64_t>(f.remaining);
    const uint64_t h =
        (static_cast<uint64_t>(bytes) ^ std::bit_cast<uint64_t>(f.rate)) * 0x9E3779B97F4A7C15ull;
    Serialization& memo = serialization_memo_[h >> (64 - kMemoBits)];
    if (memo.bytes != bytes || memo.rate != f.rate) {
      memo = {bytes, f.rate, serialization_time(bytes, f.rate)};
    }
    return checked_add(now, memo.time, "the simulated time");
  }
  const long double ps = std::ceil(static_cast<long double>(f.remaining) * 1e12L / f.rate);
  return checked_add(now, Time::ps(static_cast<int64_t>(std::min<long double>(ps, 9e18L))),
                     "the simulated time");
}

uint32_t FlowNetwork::new_flow(uint32_t id, const Route& route, int64_t bytes, Time since) {
  if (id >= slot_of_.size()) slot_of_.resize(size_t{id} + 1, kNoSlot);
  PIPESIM_ASSERT(slot_of_[id] == kNoSlot, "a flow starts once");
  uint32_t s;
  if (free_.empty()) {
    s = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    s = free_.back();
    free_.pop_back();
  }
  slot_of_[id] = s;
  Flow& f = slots_[s];
  f = Flow{};
  f.id = id;
  f.route = &route;
  f.remaining = static_cast<double>(bytes);
  f.updated = since;
  return s;
}

void FlowNetwork::add(uint32_t id, const Route& route, int64_t bytes, Time now,
                      std::vector<Update>& changed) {
  const uint32_t s = new_flow(id, route, bytes, now);
  Flow& f = slots_[s];
  f.rate = std::numeric_limits<double>::infinity();
  bool alone = true;
  double bottleneck = std::numeric_limits<double>::infinity();
  if (bytes > 0) {
    for (LinkDirection h : route.hops) {
      Link& l = links_[static_cast<size_t>(h)];
      if (!l.finite) continue;
      f.constrained = true;
      alone = alone && l.flows.empty();
      bottleneck = std::min(bottleneck, l.capacity);
      l.flows.push_back(s);
    }
  }
  if (!f.constrained) {  // no bytes, or no finite link: it joined no link's flow list
    f.finish = now;
    changed.push_back({id, now});
    return;
  }
  if (alone) {  // its own component: it gets the bottleneck and nobody else changes
    f.rate = bottleneck;
    f.finish = finish_time(f, now);
    changed.push_back({id, f.finish});
    return;
  }
  f.rate = 0;  // marks it as changed in rerate
  note_pending(route);
}

void FlowNetwork::note_pending(const Route& route) {
  for (LinkDirection h : route.hops) {
    Link& l = links_[static_cast<size_t>(h)];
    if (!l.finite || l.pending) continue;
    l.pending = true;
    pending_.push_back(h);
  }
}

// Each small component among the seeds' is filled whole once; the first component past
// local_above_ is re-rated locally from every seed not yet covered (a region may hold
// several components: the local rounds need no connection between its links).
void FlowNetwork::commit(Time now, std::vector<Update>& changed) {
  if (pending_.empty()) return;
  seeds_.swap(pending_);
  pending_.clear();
  for (LinkDirection h : seeds_) links_[static_cast<size_t>(h)].pending = false;
  const uint64_t stamp = ++commit_epoch_;
  for (size_t i = 0; i < seeds_.size(); ++i) {
    if (links_[static_cast<size_t>(seeds_[i])].covered == stamp) continue;
    if (rerate({&seeds_[i], 1}, now, changed)) {
      for (LinkDirection h : comp_links_) links_[static_cast<size_t>(h)].covered = stamp;
      continue;
    }
    // Past local_above_: one local re-rating from the seeds left.
    seeds_.erase(std::remove_if(seeds_.begin() + static_cast<std::ptrdiff_t>(i), seeds_.end(),
                                [&](LinkDirection h) {
                                  return links_[static_cast<size_t>(h)].covered == stamp;
                                }),
                 seeds_.end());
    rerate_local(std::span<const LinkDirection>(seeds_).subspan(i), now, changed);
    return;
  }
}

void FlowNetwork::add_in_flight(uint32_t id, const Route& route, int64_t bytes, double rate,
                                Time since, Time finish) {
  const uint32_t s = new_flow(id, route, bytes, since);
  Flow& f = slots_[s];
  f.rate = rate;
  f.finish = finish;
  f.constrained = join_links(s);
  PIPESIM_ASSERT(f.constrained && bytes > 0, "a flow in flight crosses a finite link");
}

bool FlowNetwork::join_links(uint32_t s) {
  bool any = false;
  for (LinkDirection h : slots_[s].route->hops) {
    if (!finite(h)) continue;
    any = true;
    links_[static_cast<size_t>(h)].flows.push_back(s);
  }
  return any;
}

Time FlowNetwork::add_copy(uint32_t id, const Route& route, uint32_t of) {
  const Flow original = slots_[slot_of_[of]];
  const uint32_t s = new_flow(id, route, 0, original.updated);
  Flow& f = slots_[s];
  f.remaining = original.remaining;
  f.rate = original.rate;
  f.finish = original.finish;
  f.exact = original.exact;
  // A flow that crosses no finite link joins none (it ends the moment it starts).
  f.constrained = original.constrained && join_links(s);
  return f.finish;
}

void FlowNetwork::remove(uint32_t id) {
  const uint32_t s = slot_of_[id];
  PIPESIM_ASSERT(s != kNoSlot, "only active flows end");
  slot_of_[id] = kNoSlot;
  free_.push_back(s);
  const Flow& f = slots_[s];
  if (!f.constrained) return;
  bool others = false;
  for (LinkDirection h : f.route->hops) {
    if (!finite(h)) continue;
    auto& v = links_[static_cast<size_t>(h)].flows;
    v.erase(std::find(v.begin(), v.end(), s));
    others = others || !v.empty();
  }
  if (others) note_pending(*f.route);
}

inline void FlowNetwork::visit_link(LinkDirection h) {
  Link& l = links_[static_cast<size_t>(h)];
  if (l.finite && l.mark != epoch_) {
    l.mark = epoch_;
    comp_links_.push_back(h);
  }
}

inline void FlowNetwork::take_flows(LinkDirection h) {
  for (uint32_t s : links_[static_cast<size_t>(h)].flows) {
    Flow& f = slots_[s];
    if (f.mark == epoch_) continue;
    f.mark = epoch_;
    comp_flows_.push_back(s);
    for (LinkDirection hop : f.route->hops) visit_link(hop);
  }
}

// Progressive filling over the component of flows reachable from the seed route's links
// through shared links: repeatedly take the link whose remaining capacity per unfrozen
// flow is smallest, fix its unfrozen flows at that share, and take their rate off every
// link they cross.
bool FlowNetwork::rerate(std::span<const LinkDirection> seeds, Time now,
                         std::vector<Update>& changed, bool whole) {
  ++epoch_;
  comp_links_.clear();
  comp_flows_.clear();
  for (LinkDirection h : seeds) visit_link(h);
  for (size_t i = 0; i < comp_links_.size(); ++i) {
    take_flows(comp_links_[i]);
    if (!whole && comp_flows_.size() > local_above_) return false;
  }
  // Bring every flow of the component up to date at the old rates.
  old_rate_.resize(comp_flows_.size());
  for (size_t i = 0; i < comp_flows_.size(); ++i) {
    Flow& f = slots_[comp_flows_[i]];
    catch_up(f, now);
    old_rate_[i] = f.rate;
    f.rate = -1;  // unfrozen
  }
  for (size_t i = 0; i < comp_links_.size(); ++i) {
    Link& l = links_[static_cast<size_t>(comp_links_[i])];
    l.left = l.capacity;
    l.unfrozen = static_cast<int>(l.flows.size());
    l.pos = static_cast<uint32_t>(i);
  }
  if (filling_ == Filling::kScan) {
    fill_by_scan();
  } else {
    fill_by_heap();
  }
  for (size_t i = 0; i < comp_flows_.size(); ++i) {
    Flow& f = slots_[comp_flows_[i]];
    if (f.rate == old_rate_[i] && f.rate > 0) continue;  // projection unchanged
    PIPESIM_ASSERT(f.rate > 0, "max-min shares are positive");
    f.finish = finish_time(f, now);
    changed.push_back({f.id, f.finish});
  }
  return true;
}

void FlowNetwork::catch_up(Flow& f, Time now) {
  const double sent = f.rate * (now - f.updated).seconds();
  if (f.rate > 0 && f.finish <= now) {
    f.remaining = 0;  // its last byte goes through now; no rounding residue
    f.exact = false;
  } else if (sent > 0) {
    f.remaining = std::max(0.0, f.remaining - sent);
    f.exact = false;
  }
  f.updated = now;
}

// Re-rating a large component without touching all of it. The max-min allocation changes
// only where a rate moves, so progressive filling runs on a region that grows until it
// holds every change: the flows F of the region's links (at first the seed route's), on
// every link they cross, with the flows outside F fixed at their rates (a link outside
// the region offers F its capacity less theirs). The result is the allocation of the
// whole component once (1) every link of a flow whose rate moved is in the region, so
// that no flow outside F sees a rate change on any of its links and each keeps the
// bottleneck it had, and (2) every flow of F whose rate did not move and whose
// bottleneck lies outside the region has at least the rate of every flow outside F on it
// (it is the largest there, so that link is still its bottleneck). Links that break
// either condition join the region and the filling runs again. The flows of a region
// that stayed within kSame of their rates keep them exactly (and their projections);
// the rest are brought up to date at their old rates and re-projected. Against the
// whole-component filling the rates agree to rounding.
namespace {

// A re-rated flow whose rate stayed within this share of its old one keeps it exactly.
constexpr double kSame = 1e-10;
bool same_rate(double a, double old) {
  return old > 0 && std::abs(a - old) <= kSame * old;
}

}  // namespace

void FlowNetwork::rerate_local(std::span<const LinkDirection> seeds, Time now,
                               std::vector<Update>& changed) {
  constexpr int kMaxRounds = 8;
  const uint64_t region = ++region_epoch_;
  region_links_.clear();
  const auto enter = [&](LinkDirection h) {
    Link& l = links_[static_cast<size_t>(h)];
    if (l.finite && l.region != region) {
      l.region = region;
      region_links_.push_back(h);
    }
  };
  for (LinkDirection h : seeds) enter(h);
  for (int round = 0;; ++round) {
    // A change that keeps spreading (a chain of links) would cost a filling per round:
    // past kMaxRounds the whole component is cheaper (F's rates are restored by now).
    if (round == kMaxRounds) {
      rerate(seeds, now, changed, true);
      return;
    }
    links_to_join(region, fill_region());
    if (expand_.empty()) break;
    for (size_t i = 0; i < comp_flows_.size(); ++i) slots_[comp_flows_[i]].rate = old_rate_[i];
    for (LinkDirection h : expand_) enter(h);
  }
  for (size_t i = 0; i < comp_flows_.size(); ++i) {
    Flow& f = slots_[comp_flows_[i]];
    const double rate = f.rate;
    f.rate = old_rate_[i];
    if (same_rate(rate, old_rate_[i])) continue;  // projection unchanged
    catch_up(f, now);
    PIPESIM_ASSERT(rate > 0, "max-min shares are positive");
    f.rate = rate;
    f.finish = finish_time(f, now);
    changed.push_back({f.id, f.finish});
  }
}

uint64_t FlowNetwork::fill_region() {
  ++epoch_;
  comp_links_.clear();
  comp_flows_.clear();
  for (LinkDirection h : region_links_) take_flows(h);
  old_rate_.resize(comp_flows_.size());
  for (size_t i = 0; i < comp_flows_.size(); ++i) {
    Flow& f = slots_[comp_flows_[i]];
    old_rate_[i] = f.rate;
    f.rate = -1;  // unfrozen
  }
  for (size_t i = 0; i < comp_links_.size(); ++i) {
    Link& l = links_[static_cast<size_t>(comp_links_[i])];
    l.left = l.capacity;
    l.unfrozen = 0;
    l.pos = static_cast<uint32_t>(i);
    for (uint32_t s : l.flows) {
      const Flow& f = slots_[s];
      if (f.mark == epoch_) {
        ++l.unfrozen;
      } else {
        l.left -= f.rate;  // outside F: fixed
      }
    }
  }
  const uint64_t in_f = epoch_;  // the flows of F carry this mark
  if (filling_ == Filling::kScan) {
    fill_by_scan();
  } else {
    fill_by_heap();
  }
  return in_f;
}

void FlowNetwork::links_to_join(uint64_t region, uint64_t in_f) {
  // Each link once.
  ++epoch_;
  expand_.clear();
  const auto grow = [&](LinkDirection h) {
    Link& l = links_[static_cast<size_t>(h)];
    if (l.region == region || l.mark == epoch_) return;
    l.mark = epoch_;
    expand_.push_back(h);
  };
  for (size_t i = 0; i < comp_flows_.size(); ++i) {
    const Flow& f = slots_[comp_flows_[i]];
    if (!same_rate(f.rate, old_rate_[i])) {
      for (LinkDirection h : f.route->hops)
        if (finite(h)) grow(h);
    } else if (links_[static_cast<size_t>(f.bottleneck)].region != region) {
      double top = 0;
      for (uint32_t t : links_[static_cast<size_t>(f.bottleneck)].flows) {
        const Flow& g = slots_[t];
        if (g.mark != in_f) top = std::max(top, g.rate);
      }
      if (f.rate < top * (1 - kSame)) grow(f.bottleneck);
    }
  }
}

// Fixes the unfrozen flows of link `h` at `share` and takes it off every link they cross;
// calls touched(link) for each such link. Returns how many flows it froze.
template <class Touched>
size_t FlowNetwork::freeze(LinkDirection h, double share, Touched&& touched) {
  size_t frozen = 0;
  for (uint32_t s : links_[static_cast<size_t>(h)].flows) {
    Flow& f = slots_[s];
    if (f.rate >= 0) continue;
    f.rate = share;
    f.bottleneck = h;
    ++frozen;
    for (LinkDirection hop : f.route->hops) {
      if (!finite(hop)) continue;
      Link& l = links_[static_cast<size_t>(hop)];
      l.left -= share;
      --l.unfrozen;
      touched(l);
    }
  }
  return frozen;
}

// The reference: each round scans every link of the component for the smallest share
// (the first in discovery order among equals). O(rounds x links).
void FlowNetwork::fill_by_scan() {
  size_t frozen = 0;
  while (frozen < comp_flows_.size()) {
    LinkDirection best = -1;
    double best_share = std::numeric_limits<double>::infinity();
    for (LinkDirection h : comp_links_) {
      const Link& l = links_[static_cast<size_t>(h)];
      if (l.unfrozen == 0) continue;
      const double share = l.share();
      if (share < best_share) {
        best_share = share;
        best = h;
      }
    }
    PIPESIM_ASSERT(best >= 0, "an unfrozen flow crosses some link of its component");
    frozen += freeze(best, best_share, [](Link&) {});
  }
}

// The same rounds in the same order, with the links kept in a min-heap keyed by (share,
// discovery position): a round pops its bottleneck in O(log links) and pushes each link
// whose share the round changed once. Entries whose share is no longer the link's are
// stale and skipped. Every link's `left` receives the same subtractions in the same order
// as in the scan, so the rates are bit-identical. O((flows x hops + links) log links).
void FlowNetwork::fill_by_heap() {
  heap_.clear();
  for (size_t i = 0; i < comp_links_.size(); ++i) {
    const Link& l = links_[static_cast<size_t>(comp_links_[i])];
    if (l.unfrozen > 0) heap_.push_back({l.share(), static_cast<uint32_t>(i)});
  }
  std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
  size_t frozen = 0;
  while (frozen < comp_flows_.size()) {
    PIPESIM_ASSERT(!heap_.empty(), "an unfrozen flow crosses some link of its component");
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    const HeapEntry top = heap_.back();
    heap_.pop_back();
    const LinkDirection best = comp_links_[top.pos];
    const Link& bl = links_[static_cast<size_t>(best)];
    if (bl.unfrozen == 0 || bl.share() != top.share) continue;  // stale
    ++epoch_;
    touched_.clear();
    frozen += freeze(best, top.share, [&](Link& l) {
      if (l.mark == epoch_) return;
      l.mark = epoch_;
      touched_.push_back(&l);
    });
    for (const Link* l : touched_) {
      if (l->unfrozen == 0) continue;
      heap_.push_back({l->share(), l->pos});
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
  }
}

}  // namespace pipesim
