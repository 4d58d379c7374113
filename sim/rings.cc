// Compact ring collectives in the engine: step by step (each step a flow, started when
// the chunk before it has arrived), as phases (symmetric rings, one timer) and folded by
// their period (the first period's members only); sim/phases.h has the rules.
#include <algorithm>
#include <optional>

#include "core/checked.h"
#include "core/error.h"
#include "sim/internal/replay.h"

namespace pipesim::replay {

// Step `step` of a compact ring: member `member` sends a chunk to the next, as a flow
// named by an id past the graph's ops (reused once no event names it any more).
void Engine::start_step(uint32_t ring, uint32_t member, uint32_t step, Time now) {
  const CompactRing& cr = graph_.rings()[ring];
  const OpId id = new_step_id();
  const Route& route = member_route(ring, member);
  step_of(id) = {ring, member, step, 0, false, now + route.latency};
  if (fold_ && rings_[ring].mode == RingState::kFold) {
    FoldState& f = folds_[rings_[ring].plan];
    f.live.push_back(id);
    ++f.started[member];
  }
  start_route(id, route, cr.chunk, now);
}

// Every step of a member crosses the same route: looked up once per member.
const Route& Engine::member_route(uint32_t ring, uint32_t member) {
  const Route*& route = member_route_[ring_base_[ring] + member];
  if (route == nullptr) {
    const Op& op = graph_.op(graph_.rings()[ring].first + member);
    route = &this->route(op.device, op.peer);
  }
  return *route;
}

RingRoutes Engine::ring_routes(uint32_t r) {
  RingRoutes out;
  const CompactRing& cr = graph_.rings()[r];
  out.chunk = cr.chunk;
  out.steps = cr.steps;
  for (uint32_t m = 0; m < members(r); ++m) out.routes.push_back(&member_route(r, m));
  return out;
}

OpId Engine::new_step_id() {
  OpId id = 0;
  if (free_steps_.empty()) {
    id = static_cast<OpId>(graph_.size() + steps_.size());
    PIPESIM_ASSERT(id <= kIdMask, "fewer than 2^30 ops and ring steps in flight");
    steps_.emplace_back();
  } else {
    id = free_steps_.back();
    free_steps_.pop_back();
  }
  return id;
}

// Whether the ring member that became ready at `now` waits for the ring's decision
// (kRingCheck, at this same moment): a symmetric ring waits to see whether all its
// members are ready at once.
bool Engine::ring_waits(uint32_t r, Time now) {
  RingState& rs = rings_[r];
  if (rs.mode == RingState::kUnseen) {
    if (std::optional<PhasePlan> plan = plan_phase(ring_routes(r), capacity_, crossing_)) {
      rs.plan = static_cast<uint32_t>(plans_.size());
      plans_.push_back(std::move(*plan));
    } else if (const std::optional<uint32_t> p = fold_period(ring_routes(r), capacity_, crossing_)) {
      rs.periodic = true;
      rs.plan = static_cast<uint32_t>(folds_.size());
      folds_.push_back({*p, {}, {}, std::vector<int64_t>(*p), 0});
    } else {
      rs.mode = RingState::kSteps;
      return false;
    }
    rs.mode = RingState::kWaiting;
    push(now, r, kRingCheck);
  }
  return rs.mode == RingState::kWaiting;
}

// The end of the moment ring r's first member became ready: with every member ready and
// its links free of other flows and phases, it runs as a phase; otherwise step by step.
void Engine::decide_ring(uint32_t r, Time now) {
  RingState& rs = rings_[r];
  const CompactRing& cr = graph_.rings()[r];
  const uint32_t n = members(r);
  bool phase = true;
  for (uint32_t m = 0; m < n && phase; ++m) phase = tl_.start[cr.first + m] != Time::max();
  const auto idle = [&](LinkDirection h) {
    return link_active_[static_cast<size_t>(h)] == 0 && held_by_[static_cast<size_t>(h)] == kNoRing;
  };
  if (rs.periodic) {
    for (uint32_t m = 0; m < n && phase; ++m)
      phase = std::all_of(member_route(r, m).hops.begin(), member_route(r, m).hops.end(), idle);
  } else {
    phase = phase && std::all_of(plans_[rs.plan].links.begin(), plans_[rs.plan].links.end(), idle);
  }
  if (!phase) {
    rs.mode = RingState::kSteps;
    for (uint32_t m = 0; m < n; ++m)
      if (tl_.start[cr.first + m] != Time::max()) join(r, m, now);
    return;
  }
  if (rs.periodic) {
    start_fold(r, now);
    return;
  }
  const PhasePlan& plan = plans_[rs.plan];
  rs.mode = RingState::kPhase;
  rs.start = now;
  rs.id = new_step_id();
  step_of(rs.id) = {r, kPhase, 0, 1, false, now};
  for (LinkDirection h : plan.links) held_by_[static_cast<size_t>(h)] = r;
  push(checked_add(now, plan.duration(), "the simulated time"), rs.id, kFlowDone);
}

// Adds to the phase's links what its first `done` steps sent (their bytes, busy time and
// flows) and the bytes of the `started` steps whose latency has begun.
void Engine::account_steps(const PhasePlan& plan, int64_t done, int64_t started) {
  const int64_t bytes = checked_mul(plan.chunk, started, "the bytes a ring sends");
  for (size_t i = 0; i < plan.links.size(); ++i) {
    LinkStats& ls = tl_.links[static_cast<size_t>(plan.links[i])];
    const int64_t k = plan.count[i];
    ls.bytes = checked_add(ls.bytes, checked_mul(bytes, k, "the bytes a ring sends"),
                           "the bytes a link carries");
    ls.busy += plan.transfer * done;
    if (done > 0) ls.peak_flows = std::max(ls.peak_flows, static_cast<int>(k));
  }
}

// The phase's end: every member's last chunk has arrived, so every member's op ends.
bool Engine::end_phase(OpId id, Time now) {
  StepFlow& sf = step_of(id);
  if (sf.ended) {  // split into steps since
    release_if_done(id);
    return false;
  }
  sf.ended = true;
  const uint32_t r = sf.ring;
  release_if_done(id);
  const PhasePlan& plan = plans_[rings_[r].plan];
  account_steps(plan, plan.steps, plan.steps);
  for (LinkDirection h : plan.links) held_by_[static_cast<size_t>(h)] = kNoRing;
  const CompactRing& cr = graph_.rings()[r];
  const uint32_t n = members(r);
  for (uint32_t m = 1; m <= n; ++m) finish(cr.first + m % n, now);
  return true;
}

// A flow is about to start on a link of ring r's phase: from here on the ring runs step
// by step, each member where the phase has brought it (the step it is in, waiting out
// the latency or sending since a known moment at the phase's rate), as the steps would
// have left it.
void Engine::split_phase(uint32_t r, Time now) {
  RingState& rs = rings_[r];
  const PhasePlan& plan = plans_[rs.plan];
  const PhasePosition at = phase_position(plan, rs.start, now);
  if (at.over) return;  // it ends at this moment; its event ends it
  rs.mode = RingState::kSteps;
  step_of(rs.id).ended = true;
  release_if_done(rs.id);
  for (LinkDirection h : plan.links) held_by_[static_cast<size_t>(h)] = kNoRing;
  account_steps(plan, at.step, at.step + 1);
  const CompactRing& cr = graph_.rings()[r];
  const uint32_t n = members(r);
  for (uint32_t m = 0; m < n; ++m) {
    const OpId id = new_step_id();
    step_of(id) = {r, m, static_cast<uint32_t>(at.step), 0, false, at.since};
    const Route& route = member_route(r, m);
    if (!at.sending) {  // waiting out the step's latency
      uint32_t slot = new_latent_slot();
      latent_[slot] = {id, &route};
      push(at.since, slot, kLatencyDone);
      continue;
    }
    for (LinkDirection h : route.hops) {
      const auto hu = static_cast<size_t>(h);
      if (link_active_[hu]++ == 0) link_since_[hu] = at.since;
      tl_.links[hu].peak_flows =
          std::max(tl_.links[hu].peak_flows, static_cast<int>(link_active_[hu]));
    }
    network_.add_in_flight(id, route, cr.chunk, plan.rate, at.since, at.finish);
    ++step_of(id).pending;
    push(at.finish, id, kFlowDone);
  }
}

// Holds every member's links, notes what the period's links carried so far, and starts
// the period's members.
void Engine::start_fold(uint32_t r, Time now) {
  RingState& rs = rings_[r];
  FoldState& f = folds_[rs.plan];
  rs.mode = RingState::kFold;
  const uint32_t n = members(r);
  for (uint32_t m = 0; m < n; ++m) {
    for (LinkDirection h : member_route(r, m).hops) held_by_[static_cast<size_t>(h)] = r;
  }
  f.before.clear();
  for (uint32_t m = 0; m < f.period; ++m) {
    for (LinkDirection h : member_route(r, m).hops) {
      LinkStats& ls = tl_.links[static_cast<size_t>(h)];
      f.before.push_back({ls.busy, ls.peak_flows});
      ls.peak_flows = 0;  // the fold's own peak, until replicate_links
    }
  }
  for (uint32_t m = 0; m < f.period; ++m) start_step(r, m, 0, now);
}

// A folded step has arrived at the next member of the period (member p - 1's at member
// p, which is member 0's image): after the last step, every image of that member ends.
void Engine::end_folded_step(OpId id, uint32_t r, uint32_t member, uint32_t step, Time now) {
  FoldState& f = folds_[rings_[r].plan];
  const auto it = std::find(f.live.begin(), f.live.end(), id);
  PIPESIM_ASSERT(it != f.live.end(), "a folded step ends once");
  f.live.erase(it);
  const CompactRing& cr = graph_.rings()[r];
  const uint32_t n = members(r);
  if (step + 1 < cr.steps) {
    start_step(r, (member + 1) % f.period, step + 1, now);
    return;
  }
  const uint32_t period = f.period;
  f.finished += n / period;
  const bool last = f.finished == n;
  if (last) {  // every step has arrived: the links are the full run's once mirrored
    replicate_links(r);
    release_links(r);
    rings_[r].mode = RingState::kSteps;
  }
  for (uint32_t k = 0; k < n / period; ++k)
    finish(cr.first + (member + k * period + 1) % n, now);
}

// What the period's links carried since the fold began, carried over to every image
// link; an image link with flows in flight gets their count and start.
void Engine::replicate_links(uint32_t r) {
  FoldState& f = folds_[rings_[r].plan];
  const uint32_t n = members(r);
  size_t i = 0;
  for (uint32_t m = 0; m < f.period; ++m) {
    const Route& route = member_route(r, m);
    const int64_t bytes = checked_mul(f.started[m], graph_.rings()[r].chunk, "a ring's bytes");
    for (size_t j = 0; j < route.hops.size(); ++j, ++i) {
      const auto h = static_cast<size_t>(route.hops[j]);
      LinkStats& ls = tl_.links[h];
      const LinkSnapshot& b = f.before[i];
      const Time busy = ls.busy - b.busy;
      const int peak = ls.peak_flows;
      ls.peak_flows = std::max(b.peak_flows, peak);
      for (uint32_t k = 1; k < n / f.period; ++k) {
        const auto g = static_cast<size_t>(member_route(r, m + k * f.period).hops[j]);
        LinkStats& image = tl_.links[g];
        image.bytes = checked_add(image.bytes, bytes, "the bytes a link carries");
        image.busy += busy;
        image.peak_flows = std::max(image.peak_flows, peak);
        link_active_[g] = link_active_[h];
        link_since_[g] = link_since_[h];
      }
    }
  }
}

void Engine::release_links(uint32_t r) {
  const uint32_t n = members(r);
  for (uint32_t m = 0; m < n; ++m) {
    for (LinkDirection h : member_route(r, m).hops) held_by_[static_cast<size_t>(h)] = kNoRing;
  }
}

// A flow is about to start on a link of folded ring r: every image of the period's
// steps in flight joins, in the state of its original (waiting out its latency, or
// sending with the same bytes left at the same rate), and the ring goes on step by step.
void Engine::unfold(uint32_t r) {
  FoldState& f = folds_[rings_[r].plan];
  rings_[r].mode = RingState::kSteps;
  replicate_links(r);
  release_links(r);
  const uint32_t n = members(r);
  for (const OpId id : f.live) {
    const StepFlow sf = step_of(id);
    for (uint32_t k = 1; k < n / f.period; ++k) {
      const uint32_t member = sf.member + k * f.period;
      const OpId copy = new_step_id();
      step_of(copy) = {r, member, sf.step, 0, false, sf.latency_done};
      const Route& route = member_route(r, member);
      if (network_.active(id)) {
        ++step_of(copy).pending;
        push(network_.add_copy(copy, route, id), copy, kFlowDone);
      } else {
        const uint32_t slot = new_latent_slot();
        latent_[slot] = {copy, &route};
        push(sf.latency_done, slot, kLatencyDone);
      }
    }
  }
  f.live.clear();
}

// The step's chunk has arrived at the next member: it sends its next step, or, after the
// last, the next member's op of the ring ends (once it has joined: a member's part of the
// collective ends no earlier than it starts).
void Engine::end_step(OpId id, Time now) {
  StepFlow& sf = step_of(id);
  sf.ended = true;
  const StepFlow done = sf;
  release_if_done(id);
  const CompactRing& cr = graph_.rings()[done.ring];
  const uint32_t n = members(done.ring);
  if (fold_ && rings_[done.ring].mode == RingState::kFold) {
    end_folded_step(id, done.ring, done.member, done.step, now);
    return;
  }
  const uint32_t next = (done.member + 1) % n;
  if (done.step + 1 < cr.steps) {
    start_step(done.ring, next, done.step + 1, now);
  } else if (tl_.start[cr.first + next] == Time::max()) {
    last_arrived_[ring_base_[done.ring] + next] = true;  // it ends when it joins
  } else {
    finish(cr.first + next, now);
  }
}

void Engine::join(uint32_t r, uint32_t member, Time now) {
  start_step(r, member, 0, now);
  if (last_arrived_.empty() || !last_arrived_[ring_base_[r] + member]) return;
  finish(graph_.rings()[r].first + member, now);
}

void Engine::release_if_done(OpId id) {
  const StepFlow& sf = step_of(id);
  if (sf.ended && sf.pending == 0) free_steps_.push_back(id);
}

}  // namespace pipesim::replay
