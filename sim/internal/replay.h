// The engine's state, shared by its two halves: sim/engine.cc (the event loop, compute
// ops, transfers as flows, memory) and sim/rings.cc (compact ring collectives: step by
// step, as phases, folded by their period). Internal to sim/: the public entry is
// simulate() in sim/engine.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "sim/copies.h"
#include "sim/engine.h"
#include "sim/event_queue.h"
#include "sim/network.h"
#include "sim/phases.h"

namespace pipesim::replay {

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
  Engine(const TaskGraph& g, const Cluster& c, const SimOptions& o);

  Timeline run();

 private:
  void push(Time t, OpId id, EventKind kind) {
    queue_.push(t, id | (static_cast<uint32_t>(kind) << kKindShift));
  }

  void try_start_head(int d, Time now);

  // Whether op `id` runs here (all do, but copy 0's alone where copies fold).
  bool simulated(OpId id) const { return !copies_ || copies_->simulated[id] != 0; }

  void start_transfer(OpId id, Time now);

  // Step `step` of a compact ring: member `member` sends a chunk to the next, as a flow
  // named by an id past the graph's ops (reused once no event names it any more).
  void start_step(uint32_t ring, uint32_t member, uint32_t step, Time now);

  // Every step of a member crosses the same route: looked up once per member.
  const Route& member_route(uint32_t ring, uint32_t member);

  // The route from src to dst as the engine's flows cross it: the cluster's, or with
  // copies folded (sim/copies.h) each hop named by its orbit's number. The engine's link
  // tables (tl_.links until expand, the network's) are indexed so.
  const Route& route(int src, int dst);

  // The members of ring r the engine runs: all, or copy 0's where the ring spans copies.
  uint32_t members(uint32_t r) const {
    return copies_ ? copies_->members[r] : graph_.rings()[r].members();
  }

  // The ring's member routes for plan_phase and fold_period.
  RingRoutes ring_routes(uint32_t r);

  OpId new_step_id();

  // --- Phases (SimOptions::fold, sim/phases.h) ---

  // Whether the ring member that became ready at `now` waits for the ring's decision
  // (kRingCheck, at this same moment): a symmetric ring waits to see whether all its
  // members are ready at once.
  bool ring_waits(uint32_t r, Time now);

  // The end of the moment ring r's first member became ready: with every member ready and
  // its links free of other flows and phases, it runs as a phase; otherwise step by step.
  void decide_ring(uint32_t r, Time now);

  // Adds to the phase's links what its first `done` steps sent (their bytes, busy time and
  // flows) and the bytes of the `started` steps whose latency has begun.
  void account_steps(const PhasePlan& plan, int64_t done, int64_t started);

  // The phase's end: every member's last chunk has arrived, so every member's op ends.
  // False for the end of a phase split into steps since (a stale event).
  bool end_phase(OpId id, Time now);

  // A flow is about to start on a link of ring r's phase: from here on the ring runs step
  // by step, each member where the phase has brought it (the step it is in, waiting out
  // the latency or sending since a known moment at the phase's rate), as the steps would
  // have left it.
  void split_phase(uint32_t r, Time now);

  // --- Folded rings (SimOptions::fold, sim/phases.h fold_period) ---

  // Holds every member's links, notes what the period's links carried so far, and starts
  // the period's members.
  void start_fold(uint32_t r, Time now);

  // A folded step has arrived at the next member of the period (member p - 1's at member
  // p, which is member 0's image): after the last step, every image of that member ends.
  void end_folded_step(OpId id, uint32_t r, uint32_t member, uint32_t step, Time now);

  // What the period's links carried since the fold began, carried over to every image
  // link; an image link with flows in flight gets their count and start.
  void replicate_links(uint32_t r);

  void release_links(uint32_t r);

  // A flow is about to start on a link of folded ring r: every image of the period's
  // steps in flight joins, in the state of its original (waiting out its latency, or
  // sending with the same bytes left at the same rate), and the ring goes on step by step.
  void unfold(uint32_t r);

  // The step's chunk has arrived at the next member: it sends its next step, or, after the
  // last, the next member's op of the ring ends.
  void end_step(OpId id, Time now);
  // Member `member` of ring r joins, step by step (its op starts): it sends its first
  // step, and its op ends at once if its last chunk has arrived.
  void join(uint32_t ring, uint32_t member, Time now);

  void release_if_done(OpId id);

  void start_route(OpId id, const Route& route, int64_t bytes, Time now);

  uint32_t new_latent_slot();

  void start_flow(OpId id, const Route& route, Time now);

  void end_flow(OpId id, Time now);

  int64_t flow_bytes(OpId id) const;

  void after_rerate(Time now);
  // Re-rates the flows started and ended at `now` (FlowNetwork::commit) and pushes the
  // projections that moved.
  void commit_rates(Time now);

  void record_link(LinkDirection h, Time now);

  // `route`: the transfer's route, or null for a compact ring's member op (its steps
  // recorded theirs) and compute ops.
  void finish(OpId id, Time now, const Route* route = nullptr);

  // --- Communication slowing compute (GpuSpec::comm_interference) ---

  // Pushes the end of device d's running compute op from its remaining work at the pace
  // it has now.
  void push_compute_end(int d, OpId id, Time now);

  // A transfer sent by device d starts (+1) or ends (-1): the first and the last re-time
  // the compute op running there.
  void note_sending(int d, int delta, Time now);

  // Whether a kOpEnd event of compute op `id` is its current end (not one re-timed since).
  bool is_current_end(OpId id, Time now) const;

  void apply_memory(OpId id, int64_t delta, Time now, bool at_end);

  void note_memory(int d, Time now, OpId cause);

  // A step of a compact ring in flight (or ended, with completion events still queued).
  struct StepFlow {
    uint32_t ring = 0, member = 0, step = 0;
    uint32_t pending = 0;  // kFlowDone events queued for this id
    bool ended = false;
    Time latency_done;  // when its bytes start to flow
  };
  StepFlow& step_of(OpId id) { return steps_[id - graph_.size()]; }
  static constexpr uint32_t kPhase = UINT32_MAX;  // StepFlow::member of a ring's phase
  // How a compact ring runs (SimOptions::fold).
  struct RingState {
    enum Mode : uint8_t { kUnseen, kWaiting, kSteps, kPhase, kFold } mode = kUnseen;
    bool periodic = false;  // folded by its period (FoldState) rather than a phase
    uint32_t plan = 0;      // its PhasePlan, or its FoldState where periodic
    Time start;             // the phase's start
    OpId id = 0;            // the phase's StepFlow id
  };
  static constexpr uint32_t kNoRing = UINT32_MAX;
  // The compact ring that `id` is a member of, or kNoRing (rings are sorted by first op).
  uint32_t ring_of(OpId id) const {
    const auto rings = graph_.rings();
    const auto after = std::upper_bound(rings.begin(), rings.end(), id,
                                        [](OpId v, const CompactRing& r) { return v < r.first; });
    if (after == rings.begin()) return kNoRing;
    const CompactRing& r = *(after - 1);
    return id < r.first + r.members() ? static_cast<uint32_t>(after - 1 - rings.begin())
                                      : kNoRing;
  }
  // A transfer waiting out its route's latency.
  struct Latent {
    OpId id;
    const Route* route;
  };

  // The fold the engine runs under (the one lower_folded kept for this cluster, else found
  // here; null: every copy simulated), and the capacity of each link its flows cross: a
  // link direction, or with copies folded an orbit (CopyFold::orbit) at its share.
  static std::shared_ptr<const CopyFold> fold_of(const TaskGraph& g, const Cluster& c,
                                                 const SimOptions& o);
  static std::vector<double> link_capacities(const Cluster& c, const CopyFold* fold);

  const TaskGraph& graph_;
  const Cluster& cluster_;
  SimOptions options_;
  // Identical copies simulated once (SimOptions::fold, sim/copies.h).
  std::shared_ptr<const CopyFold> copies_;
  // Devices [0, devices_) are those the engine keeps tables for: every device, or where
  // copies are left implicit up to the last device not of one (devices of implicit copies
  // run nothing; their figures are their images', Timeline::device).
  int devices_ = 0;
  static int devices_run(const TaskGraph& g, const Cluster& c, const CopyFold* fold);
  std::vector<double> capacity_;  // [engine link] as the flows see it
  FlowNetwork network_;
  Timeline tl_;
  EventQueue queue_;
  std::vector<uint32_t> waiting_;  // deps not yet ended, per op
  std::vector<uint32_t> cursor_;   // next op of each device's stream
  std::vector<bool> running_;
  // Compute slowed by communication, per device (empty where no GPU has
  // comm_interference, or SimOptions::comm_interference is off).
  static constexpr int64_t kPaceDen = 1'000'000;
  struct Pace {
    int64_t num = kPaceDen;  // compute speed while sending, over kPaceDen
    uint32_t sending = 0;    // its transfers in flight
    Time work_left, since;   // the running op's full-speed work left as of `since`
    Time due;                // and its end
  };
  std::vector<Pace> pace_;
  // Whether transfer `id` (a compact ring's member: each of its steps) slows its sender's
  // compute: it stays inside the sender's server (with pace_).
  bool slows_compute(OpId id) const;
  std::vector<MemBreakdown> memory_;
  std::vector<Latent> latent_;  // [slot] named by kLatencyDone events
  std::vector<uint32_t> free_latent_;
  std::vector<uint32_t> link_active_;
  std::vector<Time> link_since_;
  std::vector<FlowNetwork::Update> changed_;
  std::vector<uint32_t> ring_base_;         // [ring] index of its first member in member_route_
  std::vector<const Route*> member_route_;  // [ring_base + member] its route, once looked up
  std::vector<StepFlow> steps_;             // [id - graph size]
  // [ring_base + member] whether its last chunk arrived before its op started (step by
  // step, chunks pass through a member that has not joined; its op ends when it joins).
  std::vector<bool> last_arrived_;
  std::vector<OpId> free_steps_;
  // Phases and folds (SimOptions::fold; sim/rings.cc).
  bool fold_ = false;
  std::vector<RingState> rings_;  // [ring]
  std::vector<PhasePlan> plans_;  // [RingState::plan]
  // A periodic ring run on its first period's members (sim/phases.h, fold_period).
  struct LinkSnapshot {
    Time busy;
    int peak_flows = 0;
  };
  struct FoldState {
    uint32_t period = 0;
    std::vector<OpId> live;            // the period's steps not yet arrived
    std::vector<LinkSnapshot> before;  // the period's links (member by member, hop by hop)
    // Steps the period's members have begun (their bytes are on the links from then; a
    // transfer that unfolds the ring has put its own there already, so the links' byte
    // counts cannot tell).
    std::vector<int64_t> started;
    uint32_t finished = 0;  // member ops ended
  };
  std::vector<FoldState> folds_;    // [RingState::plan] where periodic
  std::vector<uint32_t> held_by_;   // [engine link] the ring whose phase or fold holds it
  std::vector<uint32_t> crossing_;  // [engine link] scratch of plan_phase, fold_period
  // With copies folded, the routes of copy 0's flows over the orbits.
  std::unordered_map<int64_t, std::unique_ptr<Route>> quotient_routes_;
};

}  // namespace pipesim::replay
