// Dijkstra's searches over the route graph (topology/internal/route_graph.h).
#include <boost/graph/dijkstra_shortest_paths.hpp>

#include "topology/internal/route_graph.h"

namespace pipesim::routing {
namespace {

// Thrown by SettleVisitor once every target vertex is settled.
struct AllSettled {};

// Stops Dijkstra once the vertices [first, end) are all settled: their distances and
// predecessors (and those of every vertex on their paths, settled before them) are final
// then, as in the whole run, since a settled vertex's predecessor never changes.
struct SettleVisitor : boost::default_dijkstra_visitor {
  int first = 0, end = 0;
  int* left = nullptr;
  void finish_vertex(Graph::vertex_descriptor v, const Graph&) const {
    const int x = static_cast<int>(v);
    if (x >= first && x < end && --*left == 0) throw AllSettled{};
  }
};

// Dijkstra's run from `src` until the vertices [first, end) are settled, on tables kept
// per thread between runs: each starts as Dijkstra's initialisation leaves them (every
// vertex unreached, its own predecessor, white) and the vertices a run touched are put
// back after it, so a run costs the vertices it reaches, not the graph's (a shorthand
// cluster's node inside thousands). The same steps as dijkstra_shortest_paths, its
// initialisation done ahead, and its heap's index of every vertex kept here too (Boost's
// own would allocate and zero one a vertex of the graph on every run). Returns each
// settled vertex's predecessor.
struct SearchTables {
  std::vector<Graph::vertex_descriptor> pred;
  std::vector<int64_t> dist;
  std::vector<boost::default_color_type> color;
  // The heap's place of each vertex: read only for vertices the heap holds (Dijkstra
  // checks the colour first), so it needs no putting back.
  std::vector<size_t> in_heap;
  std::vector<Graph::vertex_descriptor> touched;
  void fit(size_t n) {
    if (pred.size() < n) {
      const size_t from = pred.size();
      pred.resize(n);
      for (size_t v = from; v < n; ++v) pred[v] = v;
    }
    dist.resize(std::max(dist.size(), n), kUnreached);
    color.resize(std::max(color.size(), n), boost::white_color);
    in_heap.resize(std::max(in_heap.size(), n), 0);
  }
  void restore() {
    for (const auto v : touched) {
      pred[v] = v;
      dist[v] = kUnreached;
      color[v] = boost::white_color;
    }
    touched.clear();
  }
};

// boost::dijkstra_shortest_paths_no_init's body (the same 4-ary heap, the same
// breadth-first visit, so the same ties broken the same way) on the tables' heap index.
template <class Visitor>
void dijkstra_on_tables(const Graph& g, Graph::vertex_descriptor s, SearchTables& t, Visitor vis) {
  using Vertex = Graph::vertex_descriptor;
  const auto index = boost::get(boost::vertex_index, g);
  const auto distance = t.dist.data();
  const auto in_heap = boost::make_iterator_property_map(t.in_heap.data(), index);
  using Queue =
      boost::d_ary_heap_indirect<Vertex, 4, decltype(in_heap), int64_t*, std::less<int64_t>>;
  Queue q(distance, in_heap, std::less<int64_t>());
  const auto combine = [](int64_t a, int64_t b) { return saturating_add(a, b); };
  boost::detail::dijkstra_bfs_visitor<Visitor, Queue, decltype(boost::get(&EdgeProps::weight, g)),
                                      Vertex*, int64_t*, decltype(combine), std::less<int64_t>>
      bfs(vis, q, boost::get(&EdgeProps::weight, g), t.pred.data(), distance, combine,
          std::less<int64_t>(), int64_t{0});
  boost::breadth_first_visit(g, &s, &s + 1, q, bfs, t.color.data());
}

struct PartialVisitor : boost::default_dijkstra_visitor {
  SettleVisitor settle;
  SearchTables* tables = nullptr;
  std::unordered_map<int32_t, int32_t>* settled = nullptr;
  void discover_vertex(Graph::vertex_descriptor v, const Graph&) const {
    tables->touched.push_back(v);
  }
  void finish_vertex(Graph::vertex_descriptor v, const Graph& g) const {
    (*settled)[static_cast<int32_t>(v)] = static_cast<int32_t>(tables->pred[v]);
    settle.finish_vertex(v, g);
  }
};

}  // namespace

// Dijkstra's tree from `src` over the whole graph.
std::vector<int32_t> dijkstra_tree(const Graph& g, int src) {
  std::vector<Graph::vertex_descriptor> pred(boost::num_vertices(g));
  std::vector<int64_t> dist(boost::num_vertices(g));
  boost::dijkstra_shortest_paths(
      g, static_cast<Graph::vertex_descriptor>(src),
      boost::predecessor_map(pred.data())
          .distance_map(dist.data())
          .weight_map(boost::get(&EdgeProps::weight, g))
          .distance_combine([](int64_t a, int64_t b) { return saturating_add(a, b); })
          .distance_inf(kUnreached));
  return {pred.begin(), pred.end()};  // vertex indices fit int (ClusterBuilder's)
}

std::unordered_map<int32_t, int32_t> partial_dijkstra_tree(const Graph& g, int src, int first,
                                                           int end) {
  thread_local SearchTables tables;
  tables.fit(boost::num_vertices(g));
  std::unordered_map<int32_t, int32_t> settled;
  int left = end - first;
  PartialVisitor visitor;
  visitor.settle = {{}, first, end, &left};
  visitor.tables = &tables;
  visitor.settled = &settled;
  const auto s = static_cast<Graph::vertex_descriptor>(src);
  tables.touched.push_back(s);
  tables.dist[s] = 0;
  // (Put back however the search ends.)
  struct Restore {
    SearchTables& t;
    ~Restore() { t.restore(); }
  } restore{tables};
  try {
    dijkstra_on_tables(g, s, tables, visitor);
  } catch (const AllSettled&) {
    // The targets' paths are final.
  }
  return settled;
}

}  // namespace pipesim::routing
