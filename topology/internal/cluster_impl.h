// What a Cluster holds behind its pointer: the graph, a shorthand cluster's layout for
// closed-form routes, and the routes found so far. Shared by cluster.cc (routes) and
// shorthand.cc (the shorthand builder); not part of the public API.
#pragma once

#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "topology/cluster.h"

namespace pipesim {

namespace cluster_internal {
struct EdgeProps {
  int link = -1;
  int64_t weight = 0;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS,
                                    boost::no_property, EdgeProps>;
// The same link the other way.
inline LinkDirection reversed(LinkDirection d) {
  return d ^ 1;
}
inline constexpr size_t kShards = 16;  // route shards (Cluster::Impl::shards)
}  // namespace cluster_internal

// How a shorthand cluster is laid out, for closed-form routes: node n holds devices
// [first_device[n], first_device[n + 1]) and its links inside are [first_link[n],
// end_link[n]), laid out as those of model_node[n], the first node of its group; up[d] is
// GPU d's way to its node's NIC, nic_up[n * nics + port] a NIC's uplink, leaf_of[n] and
// leaf_up[leaf] the leaf/spine fabric (empty: one fabric switch).
struct ShorthandLayout {
  int nics = 1;  // ports per node
  std::vector<int> first_device, first_link, end_link, model_node;
  std::vector<UpPath> up;
  std::vector<LinkDirection> nic_up;
  std::vector<int> leaf_of;
  std::vector<LinkDirection> leaf_up;
};

// Routes found so far, in shards by source so that threads rarely wait for each other.
// Each shard's lock guards its routes and the Dijkstra trees of its sources; no lock is
// held while taking another.
struct Cluster::RouteShard {
  std::mutex mutex;
  std::unordered_map<int64_t, Route> routes;
  // Per source: its Dijkstra tree, exact for the whole graph or (partial) for the GPUs of
  // the source's node alone.
  struct Tree {
    std::vector<int32_t> pred;  // 4 bytes a vertex: 10,000 sources of 10,000 vertices, 400 MB
    bool partial = false;
  };
  std::unordered_map<int, Tree> predecessors;
};

struct Cluster::Impl {
  cluster_internal::Graph graph;
  std::optional<ShorthandLayout> layout;
  std::unordered_map<std::string, int> vertex_by_name;  // names never change
  std::vector<int> device_of_vertex;                    // -1: a switch or NIC
  std::array<Cluster::RouteShard, cluster_internal::kShards> shards;
};

}  // namespace pipesim
