// Collectives in phases (SimOptions::fold). A compact ring's members are symmetric when,
// run alone on otherwise idle links, every member's step gets one rate and one latency:
// then every step of every member starts and ends at the same moments, and the whole ring
// is a timer of steps x (latency + chunk / rate), with no flow in the network. The engine
// runs it so while no other flow touches its links; the moment one does, it turns the
// phase back into the steps exactly where they would be (phase_position) and goes on
// step by step, so the result is the step-by-step run's (but for a flow starting at the
// very picosecond a step ends: within that moment the steps' events would run in the
// order they were queued, which a phase does not keep; a link's peak flow count may then
// differ by one; docs/performance.md).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/time.h"
#include "schedules/task_graph.h"
#include "topology/cluster.h"

namespace pipesim {

struct PhasePlan {
  std::vector<LinkDirection> links;  // every link direction a member's step crosses, once
  std::vector<uint32_t> count;       // [links] member flows crossing it
  Time latency;                      // of one step's route
  Time transfer;                     // one chunk at `rate`
  double rate = 0;                   // every member's flow's max-min rate
  int64_t chunk = 0;
  int64_t steps = 1;
  Time duration() const { return (latency + transfer) * steps; }
};

// A compact ring as the engine runs it: its members' step routes in member order (the
// members it simulates: copy 0's where the ring spans copies, sim/copies.h), each step
// `chunk` bytes, `steps` of them; `capacity` the bandwidth of each link direction as its
// flows see it.
struct RingRoutes {
  std::vector<const Route*> routes;
  int64_t chunk = 0;
  int64_t steps = 1;
};

// The ring as a phase, or nothing where its members are not symmetric: their routes'
// latencies differ or one is zero, or max-min sharing among their flows alone would not
// give every one the same rate bit for bit (a member's tightest link is not its own).
// `scratch` holds a zero per link direction and is left so.
std::optional<PhasePlan> plan_phase(const RingRoutes& ring, const std::vector<double>& capacity,
                                    std::vector<uint32_t>& scratch);

// Rings that are not symmetric but periodic: member m + p's step is member m's shifted by
// p members (the same latency, and hop by hop the same capacities: a ring over nodes of
// p GPUs, p - 1 hops inside each node and one across), and no link direction is crossed
// by two members. Started at one moment on idle links, member m + kp then does exactly
// what member m does, so the engine runs members 0 .. p - 1 only, member p - 1 sending to
// member p's GPU as the ring does, and member 0 receiving what member p - 1 sends (its
// image). The smallest such p from 2 up with at least two periods, or nothing (also where
// a route has no latency; a period of 1 is a symmetric ring, plan_phase's). `scratch` as
// above.
std::optional<uint32_t> fold_period(const RingRoutes& ring, const std::vector<double>& capacity,
                                    std::vector<uint32_t>& scratch);

// Where every member of a phase started at `start` is at `now`.
struct PhasePosition {
  bool over = false;     // its last step ends at `now` or before
  int64_t step = 0;      // the step it is in
  bool sending = false;  // past the step's latency, sending its chunk since `since`
  Time since;            // when the step's latency is (or was) over
  Time finish;           // when the step's chunk arrives
};
PhasePosition phase_position(const PhasePlan& plan, Time start, Time now);

}  // namespace pipesim
