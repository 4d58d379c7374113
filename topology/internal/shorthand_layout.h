// How a shorthand cluster is laid out (ShorthandLayout), shared by the shorthand builder
// (shorthand.cc), which fills it, and the routes (cluster.cc), which read it. Not part of
// the public API.
#pragma once

#include <vector>

#include "topology/cluster.h"

namespace pipesim {

// The same link the other way.
inline LinkDirection reversed(LinkDirection d) {
  return d ^ 1;
}

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
  // Where every node is alike (one node group, one fabric switch): node n's links are
  // [n x intra_links, (n + 1) x intra_links) inside it and [fabric_first + n x fabric_links,
  // + fabric_links) to the fabric (its NICs' uplinks and attachments), each laid out as
  // node 0's. intra_links -1: the nodes are not alike (Cluster::nodes_interchangeable).
  int intra_links = -1, fabric_first = 0, fabric_links = 0;
};

}  // namespace pipesim
