#include "sim/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/checked.h"
#include "core/error.h"
#include "sim/event_queue.h"
#include "sim/network.h"
#include "sim/phases.h"

namespace pipesim {
namespace {

// What an event means: its payload is an id plus one of these in the top two bits.
enum EventKind : uint32_t {
  kOpEnd = 0,        // a compute op ends (op id)
  kLatencyDone = 1,  // a transfer's latency has elapsed: its bytes start to flow (its
                     // slot in the engine's latent_ table)
  kFlowDone = 2,     // a flow's projected completion (stale if re-rated since), or the end
                     // of a ring's phase
  kRingCheck = 3,    // the end of the moment a symmetric ring's first member became ready
                     // (ring index): it runs as a phase or step by step
};
constexpr uint32_t kKindShift = 30;
constexpr uint32_t kIdMask = (1u << kKindShift) - 1;

class Engine {
 public:
  Engine(const TaskGraph& g, const Cluster& c, const SimOptions& o)
      : graph_(g),
        cluster_(c),
        options_(o),
        network_(c, g.size(), FlowNetwork::Filling::kHeap,
                 o.exact_sharing ? FlowNetwork::kNeverLocal : FlowNetwork::kLocalAbove) {
    const size_t n = g.size();
    PIPESIM_ASSERT(g.num_devices() == c.num_devices(), "TaskGraph built for this cluster");
    PIPESIM_ASSERT(n <= kIdMask, "fewer than 2^30 ops");
    reserve_huge(tl_.start, n);
    reserve_huge(tl_.end, n);
    reserve_huge(waiting_, n);
    tl_.start.assign(n, Time::max());
    tl_.end.assign(n, Time::max());
    tl_.devices.resize(static_cast<size_t>(c.num_devices()));
    tl_.links.resize(static_cast<size_t>(c.num_links()) * 2);
    link_active_.assign(tl_.links.size(), 0);
    link_since_.assign(tl_.links.size(), Time::zero());
    waiting_.resize(n);
    for (OpId id = 0; id < n; ++id) waiting_[id] = static_cast<uint32_t>(g.deps(id).size());
    cursor_.assign(static_cast<size_t>(c.num_devices()), 0);
    running_.assign(static_cast<size_t>(c.num_devices()), false);
    memory_.resize(static_cast<size_t>(c.num_devices()));
    queue_.reserve(static_cast<size_t>(c.num_devices()) * 2 + 64);
    size_t members = 0;
    for (const CompactRing& r : g.rings()) {
      ring_base_.push_back(static_cast<uint32_t>(members));
      members += r.n;
    }
    member_route_.assign(members, nullptr);
    // Phases are exact, but they record no link samples.
    fold_ = o.fold && !o.record_links && !g.rings().empty();
    if (fold_) {
      rings_.resize(g.rings().size());
      phase_on_link_.assign(tl_.links.size(), kNoRing);
      crossing_.assign(tl_.links.size(), 0);
    }
  }

  Timeline run() {
    for (int d = 0; d < cluster_.num_devices(); ++d) {
      memory_[static_cast<size_t>(d)] = graph_.static_memory(d);
      note_memory(d, Time::zero(), UINT32_MAX);
    }
    for (OpId id = 0; id < graph_.size(); ++id) {
      if (waiting_[id] == 0 && graph_.op(id).kind == OpKind::kTransfer)
        start_transfer(id, Time::zero());
    }
    for (int d = 0; d < cluster_.num_devices(); ++d) try_start_head(d, Time::zero());

    Time now = Time::zero();
    uint32_t popped = 0;
    while (!queue_.empty()) {
      if (options_.deadline && (++popped & 0x3FFFu) == 0) check(options_.deadline);
      const Event e = queue_.pop();
      PIPESIM_ASSERT(e.time >= now, "time never goes backwards");
      now = e.time;
      const OpId id = e.payload & kIdMask;
      switch (e.payload >> kKindShift) {
        case kOpEnd:
          ++tl_.events;
          finish(id, now);
          break;
        case kLatencyDone: {
          ++tl_.events;
          const Latent l = latent_[id];
          free_latent_.push_back(id);
          start_flow(l.id, *l.route, now);
          break;
        }
        case kRingCheck:
          ++tl_.events;
          decide_ring(id, now);
          break;
        case kFlowDone:
          if (id >= graph_.size()) --step_of(id).pending;
          if (id >= graph_.size() && step_of(id).member == kPhase) {
            ++tl_.events;
            end_phase(id, now);
            break;
          }
          if (!network_.is_current(id, now)) {  // re-rated since; a newer event stands
            if (id >= graph_.size()) release_if_done(id);
            break;
          }
          ++tl_.events;
          end_flow(id, now);
          break;
        default:
          PIPESIM_ASSERT(false, "known event kind");
      }
    }
    // The end of the last op (stale flow projections may have been popped later).
    for (OpId id = 0; id < graph_.size(); ++id) {
      PIPESIM_ASSERT(tl_.end[id] != Time::max(), "every op of a validated TaskGraph runs");
      tl_.makespan = max(tl_.makespan, tl_.end[id]);
    }
    return std::move(tl_);
  }

 private:
  void push(Time t, OpId id, EventKind kind) {
    queue_.push(t, id | (static_cast<uint32_t>(kind) << kKindShift));
  }

  void try_start_head(int d, Time now) {
    const auto du = static_cast<size_t>(d);
    if (running_[du]) return;
    const auto stream = graph_.stream(d);
    if (cursor_[du] >= stream.size()) return;
    const OpId head = stream[cursor_[du]];
    if (waiting_[head] != 0) return;
    running_[du] = true;
    const Op& op = graph_.op(head);
    tl_.start[head] = now;
    apply_memory(head, op.mem_at_start, now, false);
    push(checked_add(now, op.duration, "the simulated time"), head, kOpEnd);
  }

  void start_transfer(OpId id, Time now) {
    const Op& op = graph_.op(id);
    tl_.start[id] = now;
    if (const uint32_t r = ring_of(id); r != kNoRing) {
      if (fold_ && ring_waits(r, now)) return;
      start_step(r, id - graph_.rings()[r].first, 0, now);
      return;
    }
    start_route(id, cluster_.route(op.device, op.peer), op.bytes, now);
  }

  // Step `step` of a compact ring: member `member` sends a chunk to the next, as a flow
  // named by an id past the graph's ops (reused once no event names it any more).
  void start_step(uint32_t ring, uint32_t member, uint32_t step, Time now) {
    const CompactRing& cr = graph_.rings()[ring];
    const OpId id = new_step_id();
    step_of(id) = {ring, member, step, 0, false};
    start_route(id, member_route(ring, member), cr.chunk, now);
  }

  // Every step of a member crosses the same route: looked up once per member.
  const Route& member_route(uint32_t ring, uint32_t member) {
    const Route*& route = member_route_[ring_base_[ring] + member];
    if (route == nullptr) {
      const Op& op = graph_.op(graph_.rings()[ring].first + member);
      route = &cluster_.route(op.device, op.peer);
    }
    return *route;
  }

  OpId new_step_id() {
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

  // --- Phases (SimOptions::fold, sim/phases.h) ---

  // Whether the ring member that became ready at `now` waits for the ring's decision
  // (kRingCheck, at this same moment): a symmetric ring waits to see whether all its
  // members are ready at once.
  bool ring_waits(uint32_t r, Time now) {
    RingState& rs = rings_[r];
    if (rs.mode == RingState::kUnseen) {
      std::optional<PhasePlan> plan = plan_phase(graph_, r, cluster_, crossing_);
      if (!plan) {
        rs.mode = RingState::kSteps;
        return false;
      }
      rs.plan = static_cast<uint32_t>(plans_.size());
      plans_.push_back(std::move(*plan));
      rs.mode = RingState::kWaiting;
      push(now, r, kRingCheck);
    }
    return rs.mode == RingState::kWaiting;
  }

  // The end of the moment ring r's first member became ready: with every member ready and
  // its links free of other flows and phases, it runs as a phase; otherwise step by step.
  void decide_ring(uint32_t r, Time now) {
    RingState& rs = rings_[r];
    const CompactRing& cr = graph_.rings()[r];
    const PhasePlan& plan = plans_[rs.plan];
    bool phase = true;
    for (uint32_t m = 0; m < cr.n && phase; ++m) phase = tl_.start[cr.first + m] != Time::max();
    for (size_t i = 0; i < plan.links.size() && phase; ++i) {
      const auto h = static_cast<size_t>(plan.links[i]);
      phase = link_active_[h] == 0 && phase_on_link_[h] == kNoRing;
    }
    if (!phase) {
      rs.mode = RingState::kSteps;
      for (uint32_t m = 0; m < cr.n; ++m)
        if (tl_.start[cr.first + m] != Time::max()) start_step(r, m, 0, now);
      return;
    }
    rs.mode = RingState::kPhase;
    rs.start = now;
    rs.id = new_step_id();
    step_of(rs.id) = {r, kPhase, 0, 1, false};
    for (LinkDirection h : plan.links) phase_on_link_[static_cast<size_t>(h)] = r;
    push(checked_add(now, plan.duration(), "the simulated time"), rs.id, kFlowDone);
  }

  // Adds to the phase's links what its first `done` steps sent (their bytes, busy time and
  // flows) and the bytes of the `started` steps whose latency has begun.
  void account_steps(const PhasePlan& plan, int64_t done, int64_t started) {
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
  void end_phase(OpId id, Time now) {
    StepFlow& sf = step_of(id);
    if (sf.ended) {  // split into steps since
      release_if_done(id);
      return;
    }
    sf.ended = true;
    const uint32_t r = sf.ring;
    release_if_done(id);
    const PhasePlan& plan = plans_[rings_[r].plan];
    account_steps(plan, plan.steps, plan.steps);
    for (LinkDirection h : plan.links) phase_on_link_[static_cast<size_t>(h)] = kNoRing;
    const CompactRing& cr = graph_.rings()[r];
    for (uint32_t m = 1; m <= cr.n; ++m) finish(cr.first + m % cr.n, now);
  }

  // A flow is about to start on a link of ring r's phase: from here on the ring runs step
  // by step, each member where the phase has brought it (the step it is in, waiting out
  // the latency or sending since a known moment at the phase's rate), as the steps would
  // have left it.
  void split_phase(uint32_t r, Time now) {
    RingState& rs = rings_[r];
    const PhasePlan& plan = plans_[rs.plan];
    const PhasePosition at = phase_position(plan, rs.start, now);
    if (at.over) return;  // it ends at this moment; its event ends it
    rs.mode = RingState::kSteps;
    step_of(rs.id).ended = true;
    release_if_done(rs.id);
    for (LinkDirection h : plan.links) phase_on_link_[static_cast<size_t>(h)] = kNoRing;
    account_steps(plan, at.step, at.step + 1);
    const CompactRing& cr = graph_.rings()[r];
    for (uint32_t m = 0; m < cr.n; ++m) {
      const OpId id = new_step_id();
      step_of(id) = {r, m, static_cast<uint32_t>(at.step), 0, false};
      const Route& route = member_route(r, m);
      if (!at.sending) {  // waiting out the step's latency
        uint32_t slot = new_latent_slot();
        latent_[slot] = {id, &route};
        push(at.latency_done, slot, kLatencyDone);
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


  // The step's chunk has arrived at the next member: it sends its next step, or, after the
  // last, the next member's op of the ring ends.
  void end_step(OpId id, Time now) {
    StepFlow& sf = step_of(id);
    sf.ended = true;
    const StepFlow done = sf;
    release_if_done(id);
    const CompactRing& cr = graph_.rings()[done.ring];
    const uint32_t next = (done.member + 1) % cr.n;
    if (done.step + 1 < cr.steps) {
      start_step(done.ring, next, done.step + 1, now);
    } else {
      finish(cr.first + next, now);
    }
  }

  void release_if_done(OpId id) {
    const StepFlow& sf = step_of(id);
    if (sf.ended && sf.pending == 0) free_steps_.push_back(id);
  }

  void start_route(OpId id, const Route& route, int64_t bytes, Time now) {
    for (LinkDirection h : route.hops) {
      auto& link_bytes = tl_.links[static_cast<size_t>(h)].bytes;
      link_bytes = checked_add(link_bytes, bytes, "the bytes a link carries");
    }
    if (route.latency > Time::zero()) {
      // The event names the transfer's slot in latent_, which holds its id and route.
      const uint32_t slot = new_latent_slot();
      latent_[slot] = {id, &route};
      push(checked_add(now, route.latency, "the simulated time"), slot, kLatencyDone);
    } else {
      start_flow(id, route, now);
    }
  }

  uint32_t new_latent_slot() {
    if (free_latent_.empty()) {
      const auto slot = static_cast<uint32_t>(latent_.size());
      PIPESIM_ASSERT(slot <= kIdMask, "fewer than 2^30 transfers in their latency");
      latent_.emplace_back();
      return slot;
    }
    const uint32_t slot = free_latent_.back();
    free_latent_.pop_back();
    return slot;
  }

  void start_flow(OpId id, const Route& route, Time now) {
    if (fold_) {
      for (LinkDirection h : route.hops) {
        if (const uint32_t r = phase_on_link_[static_cast<size_t>(h)]; r != kNoRing)
          split_phase(r, now);
      }
    }
    for (LinkDirection h : route.hops) {
      const auto hu = static_cast<size_t>(h);
      if (link_active_[hu]++ == 0) link_since_[hu] = now;
      tl_.links[hu].peak_flows =
          std::max(tl_.links[hu].peak_flows, static_cast<int>(link_active_[hu]));
    }
    changed_.clear();
    network_.add(id, route, flow_bytes(id), now, changed_);
    after_rerate(now);
  }

  void end_flow(OpId id, Time now) {
    const Route& route = network_.route(id);
    changed_.clear();
    network_.remove(id, now, changed_);
    for (LinkDirection h : route.hops) {
      const auto hu = static_cast<size_t>(h);
      if (--link_active_[hu] == 0) tl_.links[hu].busy += now - link_since_[hu];
    }
    after_rerate(now);
    if (id >= graph_.size()) {
      if (options_.record_links) {
        for (LinkDirection h : route.hops) record_link(h, now);
      }
      end_step(id, now);
      return;
    }
    finish(id, now, &route);
  }

  int64_t flow_bytes(OpId id) const {
    if (id < graph_.size()) return graph_.op(id).bytes;
    return graph_.rings()[steps_[id - graph_.size()].ring].chunk;
  }

  void after_rerate(Time now) {
    for (const FlowNetwork::Update& u : changed_) {
      if (u.flow >= graph_.size()) ++step_of(u.flow).pending;
      push(u.finish, u.flow, kFlowDone);
    }
    if (!options_.record_links) return;
    for (const FlowNetwork::Update& u : changed_) {
      for (LinkDirection h : network_.route(u.flow).hops) record_link(h, now);
    }
  }

  void record_link(LinkDirection h, Time now) {
    const double cap = cluster_.direction_bandwidth(h);
    if (!std::isfinite(cap)) return;
    tl_.link_samples.push_back({now, h, static_cast<float>(network_.load(h) / cap)});
  }

  // `route`: the transfer's route, or null for a compact ring's member op (its steps
  // recorded theirs) and compute ops.
  void finish(OpId id, Time now, const Route* route = nullptr) {
    const Op& op = graph_.op(id);
    tl_.end[id] = now;
    if (op.kind == OpKind::kTransfer) {
      if (options_.record_links && route != nullptr) {
        for (LinkDirection h : route->hops) record_link(h, now);
      }
    } else {
      const auto d = static_cast<size_t>(op.device);
      apply_memory(id, op.mem_at_end, now, true);
      tl_.devices[d].busy += op.duration;
      ++tl_.devices[d].ops;
      running_[d] = false;
      ++cursor_[d];
    }
    for (OpId s : graph_.successors(id)) {
      if (--waiting_[s] != 0) continue;
      const Op& next = graph_.op(s);
      if (next.kind == OpKind::kTransfer) {
        start_transfer(s, now);
      } else {
        try_start_head(next.device, now);
      }
    }
    if (op.kind != OpKind::kTransfer) try_start_head(op.device, now);
  }

  void apply_memory(OpId id, int64_t delta, Time now, bool at_end) {
    if (delta == 0) return;
    const Op& op = graph_.op(id);
    auto& mem = memory_[static_cast<size_t>(op.device)];
    auto& slot = mem[static_cast<size_t>(op.mem_category)];
    slot = checked_add(slot, delta, "a device's memory");
    PIPESIM_ASSERT(slot >= 0, "memory never goes negative");
    if (options_.record_memory) tl_.memory_changes.push_back({now, id, at_end});
    if (delta > 0) note_memory(op.device, now, id);
  }

  void note_memory(int d, Time now, OpId cause) {
    const auto du = static_cast<size_t>(d);
    const auto& mem = memory_[du];
    int64_t total = 0;
    for (int64_t v : mem) total = checked_add(total, v, "a device's memory");
    DeviceStats& ds = tl_.devices[du];
    if (total > ds.peak_memory) {
      ds.peak_memory = total;
      ds.at_peak = mem;
      ds.peak_time = now;
    }
    const int64_t capacity = cluster_.device(d).gpu.memory_bytes;
    // The first crossing; of crossings at the same moment (symmetric ranks), the lowest
    // device's, whatever order that moment's events ran in.
    if (total > capacity && (!tl_.oom.oom || (now == tl_.oom.time && d < tl_.oom.device)))
      tl_.oom = {true, d, cause, now, total, capacity};
  }

  // A step of a compact ring in flight (or ended, with completion events still queued).
  struct StepFlow {
    uint32_t ring = 0, member = 0, step = 0;
    uint32_t pending = 0;  // kFlowDone events queued for this id
    bool ended = false;
  };
  StepFlow& step_of(OpId id) { return steps_[id - graph_.size()]; }
  static constexpr uint32_t kPhase = UINT32_MAX;  // StepFlow::member of a ring's phase
  // How a compact ring runs (SimOptions::fold).
  struct RingState {
    enum Mode : uint8_t { kUnseen, kWaiting, kSteps, kPhase } mode = kUnseen;
    uint32_t plan = 0;  // its PhasePlan, once found symmetric
    Time start;         // the phase's start
    OpId id = 0;        // the phase's StepFlow id
  };
  static constexpr uint32_t kNoRing = UINT32_MAX;
  // The compact ring that `id` is a member of, or kNoRing (rings are sorted by first op).
  uint32_t ring_of(OpId id) const {
    const auto rings = graph_.rings();
    const auto after = std::upper_bound(rings.begin(), rings.end(), id,
                                        [](OpId v, const CompactRing& r) { return v < r.first; });
    if (after == rings.begin()) return kNoRing;
    const CompactRing& r = *(after - 1);
    return id < r.first + r.n ? static_cast<uint32_t>(after - 1 - rings.begin()) : kNoRing;
  }
  // A transfer waiting out its route's latency.
  struct Latent {
    OpId id;
    const Route* route;
  };

  const TaskGraph& graph_;
  const Cluster& cluster_;
  SimOptions options_;
  FlowNetwork network_;
  Timeline tl_;
  EventQueue queue_;
  std::vector<uint32_t> waiting_;  // deps not yet ended, per op
  std::vector<uint32_t> cursor_;   // next op of each device's stream
  std::vector<bool> running_;
  std::vector<MemBreakdown> memory_;
  std::vector<Latent> latent_;  // [slot] named by kLatencyDone events
  std::vector<uint32_t> free_latent_;
  std::vector<uint32_t> link_active_;
  std::vector<Time> link_since_;
  std::vector<FlowNetwork::Update> changed_;
  std::vector<uint32_t> ring_base_;         // [ring] index of its first member in member_route_
  std::vector<const Route*> member_route_;  // [ring_base + member] its route, once looked up
  std::vector<StepFlow> steps_;             // [id - graph size]
  std::vector<OpId> free_steps_;
  // Phases (SimOptions::fold; sim/internal/phases.inc).
  bool fold_ = false;
  std::vector<RingState> rings_;           // [ring]
  std::vector<PhasePlan> plans_;           // [RingState::plan]
  std::vector<uint32_t> phase_on_link_;    // [link direction] the ring whose phase holds it
  std::vector<uint32_t> crossing_;         // [link direction] scratch of plan_phase
};

}  // namespace

Timeline simulate(const TaskGraph& graph, const Cluster& cluster, const SimOptions& options) {
  return Engine(graph, cluster, options).run();
}

}  // namespace pipesim
