// Chrome trace-event JSON (loads in Perfetto and chrome://tracing): a process per device,
// a thread per stream (compute; one per link direction the device sends or receives on),
// X events with real durations in microseconds, a flow arrow from each send to its
// receive, a memory counter track per device, stacked by category, and a utilisation
// counter per link direction in a "network" process.
#pragma once

#include <ostream>

#include "sim/engine.h"

namespace pipesim {

// The timeline must have been simulated with SimOptions::record_memory and record_links.
void write_trace(std::ostream& out, const TaskGraph& graph, const Cluster& cluster,
                 const Timeline& timeline);

}  // namespace pipesim
