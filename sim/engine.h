// The engine: replays a TaskGraph on a Cluster and returns the Timeline.
//
// It knows nothing of GPipe or DAPPLE: ops start when their stream predecessor and their
// deps have ended; compute ops take their duration on their device's compute stream;
// transfers take the link time of their route (latency + bytes / bottleneck bandwidth on
// an idle path) and never occupy a compute stream.
#pragma once

#include <cstdint>
#include <vector>

#include "core/time.h"
#include "schedules/task_graph.h"
#include "topology/cluster.h"

namespace pipesim {

struct DeviceStats {
  Time busy;  // total compute-stream time
  int64_t peak_memory = 0;
  MemBreakdown at_peak{};  // breakdown at the moment of the peak
  Time peak_time;
  uint32_t ops = 0;  // compute ops run
};

struct LinkStats {
  int64_t bytes = 0;
  Time busy;  // time with at least one transfer on this link direction
};

// A change of a device's memory, in the order the engine applied it.
struct MemoryChange {
  Time time;
  OpId op;
  bool at_end;
};

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
  std::vector<DeviceStats> devices;          // [device]
  std::vector<LinkStats> links;              // [link direction]
  std::vector<MemoryChange> memory_changes;  // only with SimOptions::record_memory
  OomInfo oom;
  uint64_t events = 0;
};

struct SimOptions {
  bool record_memory = false;  // keep every memory change (for traces)
};

Timeline simulate(const TaskGraph& graph, const Cluster& cluster, const SimOptions& options = {});

}  // namespace pipesim
