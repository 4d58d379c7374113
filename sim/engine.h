// The engine: replays a TaskGraph on a Cluster and returns the Timeline.
//
// It knows nothing of GPipe or DAPPLE: ops start when their stream predecessor and their
// deps have ended; compute ops take their duration on their device's compute stream;
// transfers never occupy a compute stream: each waits its route's latency, then sends its
// bytes as a flow sharing every link direction it crosses max-min fairly with the other
// flows there (FlowNetwork). On an idle path that is latency + bytes / bottleneck.
// A compact ring (TaskGraph::rings) runs each of its steps as such a transfer, started when
// the chunk before it has arrived, exactly as the ring's expanded transfers would run, or,
// when its members are symmetric or periodic, as a phase or folded (SimOptions::fold).
// While a GPU sends a transfer of its own inside its server, its compute op runs slower by
// the GPU's GpuSpec::comm_interference (the SMs and memory bandwidth the communication
// kernel takes copying over NVLink; a transfer leaving the server goes through the NIC and
// is not counted): the op's remaining work is re-timed whenever its GPU's first such
// transfer starts or its last one ends, in integer picoseconds.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/deadline.h"
#include "core/time.h"
#include "schedules/task_graph.h"
#include "topology/cluster.h"

namespace pipesim {

struct CopyFold;

struct DeviceStats {
  Time busy;  // total compute-stream time (longer than the ops' durations where slowed)
  int64_t peak_memory = 0;
  MemBreakdown at_peak{};  // breakdown at the moment of the peak
  Time peak_time;
  uint32_t ops = 0;  // compute ops run
};

struct LinkStats {
  int64_t bytes = 0;
  Time busy;           // time with at least one flow sending on this link direction
  int peak_flows = 0;  // most flows sending on it at once
};

// Utilisation of a link direction from `time` on (sum of its flows' rates / capacity).
struct LinkSample {
  Time time;
  LinkDirection link;
  float utilisation;
};

// A change of a device's memory, in the order the engine applied it (where copies fold,
// each of copy 0's changes followed by its images', at the same moment: sim/copies.h).
struct MemoryChange {
  Time time;
  OpId op;
  bool at_end;
};

// The first time a device's memory crossed its capacity (the lowest such device at that
// time).
struct OomInfo {
  bool oom = false;
  int device = -1;
  OpId op = 0;
  Time time;
  int64_t bytes = 0;  // the device's memory just after the op crossed capacity
  int64_t capacity = 0;
};

struct Timeline {
  std::vector<Time> start, end;  // [op]
  Time makespan;
  // [device]; where the graph leaves copies implicit, only up to the last device of none
  // (read every device through device()).
  std::vector<DeviceStats> devices;
  // [link direction]; where the graph leaves copies implicit, [orbit] of `orbits` (read
  // every direction through link()).
  std::vector<LinkStats> links;
  std::vector<MemoryChange> memory_changes;  // only with SimOptions::record_memory
  std::vector<LinkSample> link_samples;      // only with SimOptions::record_links
  OomInfo oom;
  uint64_t events = 0;
  int folded_copies = 1;  // data-parallel copies simulated as one (SimOptions::fold)
  // [device] where the graph leaves copies implicit (TaskGraph::built_copies): the built
  // device whose figures this one has (itself if built); empty otherwise. Such devices run
  // no op of the graph: make_report takes their per-op figures from this one.
  std::vector<int32_t> figures_of;
  // A device's statistics: where copies are left implicit, its built image's (their own
  // entries in `devices` are left empty, expand).
  const DeviceStats& device(int d) const {
    const int32_t shown = figures_of.empty() ? d : figures_of[static_cast<size_t>(d)];
    return devices[static_cast<size_t>(shown)];
  }
  // Where copies are left implicit: the fold whose orbits `links` holds (sim/copies.h).
  std::shared_ptr<const CopyFold> orbits;
  // A link direction's statistics (its orbit's, where `orbits` is set), and how many.
  LinkStats link(LinkDirection l) const;
  size_t num_link_directions() const;
};

struct SimOptions {
  bool record_memory = false;  // keep every memory change (for traces)
  bool record_links = false;   // keep every change of link utilisation (for traces)
  // Re-rate the whole component at every flow start and end, whatever its size: rates bit
  // for bit those of progressive filling from scratch (the test oracle), at the cost of
  // large collectives (a 1 GiB tree over 2048 GPUs: about 12x the CPU time). Off, components past
  // FlowNetwork::kLocalAbove flows are re-rated on the region whose rates move, which agrees
  // with the oracle to rounding (docs/performance.md, "Local re-rating").
  bool exact_sharing = false;
  // Compact rings whose members all become ready at one moment on idle links run as a
  // phase (symmetric members: one timer, no flow) or folded by their period (only the
  // first period's members as flows), and turn back into steps the moment another flow
  // needs their links: the step-by-step results with far fewer events (sim/phases.h;
  // docs/performance.md, "Collectives in phases and folded rings"). Off
  // (`pipesim run --no-fold`): every step as its own flow.
  // Also: a graph of identical data-parallel copies runs copy 0 alone, the others' figures
  // copied from it (sim/copies.h), unless memory changes or link samples are recorded.
  bool fold = true;
  // GpuSpec::comm_interference slows compute while its GPU sends. Off for replays of
  // measured op times, which hold the slowing already (backend/validate.cc).
  bool comm_interference = true;
  // Past this, the simulation stops with DeadlinePassed (its timeline lost): a caller's
  // time limit (plan --time-limit). Checked every few thousand events.
  Deadline deadline;
};

Timeline simulate(const TaskGraph& graph, const Cluster& cluster, const SimOptions& options = {});

}  // namespace pipesim
