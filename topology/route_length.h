// The longest route between two GPUs, in links, for the work estimate: flows that cross
// many links make each max-min re-rating longer (a chain of GPUs, a torus), which counting
// transfers alone does not see.
#pragma once

#include "topology/cluster.h"

namespace pipesim {

// Two breadth-first searches over the links (the double sweep): from device 0 to the GPU
// farthest from it, then the farthest GPU from that one. O(vertices + links). Exact on
// graphs without cycles (a chain, a tree of switches); on others a lower bound that is
// within a factor of 2 of the longest fewest-hop route.
int longest_route_hops(const Cluster& cluster);

}  // namespace pipesim
