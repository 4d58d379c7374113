// The graph routes are searched on (topology/cluster.cc builds it) and the Dijkstra searches
// over it (topology/route_search.cc). Internal to topology/.
#pragma once

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

namespace pipesim::routing {

struct EdgeProps {
  int link = -1;
  int64_t weight = 0;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS,
                                    boost::no_property, EdgeProps>;

// Route lengths saturate just below the largest int64_t, which Dijkstra takes for
// "unreached": a path of months-long latencies is as long as it gets, never unreachable and
// never wrapped around to a negative length (undefined behaviour besides).
inline constexpr int64_t kUnreached = std::numeric_limits<int64_t>::max();
inline int64_t saturating_add(int64_t a, int64_t b) {
  if (a == kUnreached || b == kUnreached) return kUnreached;
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kUnreached - 1 : std::min(r, kUnreached - 1);
}

// Dijkstra's tree from `src` over the whole graph: each vertex's predecessor.
std::vector<int32_t> dijkstra_tree(const Graph& g, int src);

// Dijkstra's run from `src` until the vertices [first, end) are settled, on tables kept per
// thread between runs (so a run costs the vertices it reaches, not the graph's): each
// settled vertex's predecessor.
std::unordered_map<int32_t, int32_t> partial_dijkstra_tree(const Graph& g, int src, int first,
                                                           int end);

}  // namespace pipesim::routing
