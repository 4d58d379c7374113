#include "topology/route_length.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/visitors.hpp>
#include <vector>

namespace pipesim {
namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;

// Hops from `source` to every vertex (unreachable ones stay 0).
std::vector<int> hops_from(const Graph& g, int source) {
  std::vector<int> hops(boost::num_vertices(g), 0);
  boost::breadth_first_search(
      g, static_cast<Graph::vertex_descriptor>(source),
      boost::visitor(boost::make_bfs_visitor(
          boost::record_distances(hops.data(), boost::on_tree_edge()))));
  return hops;
}

// The GPU farthest from `source`, and its hops.
std::pair<int, int> farthest_gpu(const Cluster& c, const Graph& g, int source) {
  const std::vector<int> hops = hops_from(g, source);
  std::pair<int, int> best{source, 0};
  for (const Device& d : c.devices()) {
    const int h = hops[static_cast<size_t>(d.vertex)];
    if (h > best.second) best = {d.vertex, h};
  }
  return best;
}

}  // namespace

int longest_route_hops(const Cluster& c) {
  if (c.num_devices() < 2) return 0;
  size_t vertices = 0;
  for (const Device& d : c.devices()) vertices = std::max(vertices, static_cast<size_t>(d.vertex) + 1);
  for (int i = 0; i < c.num_links(); ++i)
    vertices = std::max(vertices, static_cast<size_t>(std::max(c.link(i).a, c.link(i).b)) + 1);
  Graph g(vertices);
  for (int i = 0; i < c.num_links(); ++i)
    boost::add_edge(static_cast<Graph::vertex_descriptor>(c.link(i).a),
                    static_cast<Graph::vertex_descriptor>(c.link(i).b), g);
  const int far = farthest_gpu(c, g, c.device(0).vertex).first;
  return farthest_gpu(c, g, far).second;
}

}  // namespace pipesim
