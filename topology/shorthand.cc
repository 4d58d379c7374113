// The shorthand builder: `nodes x gpus_per_node` (or node groups) with their links inside
// each node, the NICs and the fabric joining the nodes (docs/presets.md, "How the
// shorthand becomes a graph").
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "topology/cluster.h"
#include "topology/internal/shorthand_layout.h"

namespace pipesim {

namespace {
// nvidia-smi topo -m of a DGX-1 (V100): NVLink bricks between GPU pairs (0 = none).
constexpr int kDgx1Bricks[8][8] = {
    {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0},
    {2, 1, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
    {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0},
};
}  // namespace

Cluster ClusterBuilder::shorthand(int nodes, int gpus_per_node, const GpuSpec& gpu,
                                  const LinkSpec& intra, const LinkSpec& inter,
                                  const ShorthandOptions& o) {
  return shorthand({NodeGroup{nodes, gpus_per_node, gpu, intra, o.intra, o.gpus_per_switch}}, inter,
                   o);
}

namespace {

using IntraTopology = ClusterBuilder::IntraTopology;

IntraTopology resolved_topology(const ClusterBuilder::NodeGroup& g) {
  if (g.topology != IntraTopology::kDefault) return g.topology;
  return g.intra.kind == LinkKind::kNvLink ? IntraTopology::kMesh : IntraTopology::kSwitch;
}

}  // namespace

// The links inside node n of group g, whose GPUs are the vertices `gv` and devices from
// `first`; a tree's host bridge (where its NIC hangs) in `host_bridge`.
void ClusterBuilder::add_node_links(const NodeGroup& g, int n, const std::vector<int>& gv,
                                    int first, std::vector<UpPath>& up,
                                    int& host_bridge) {
  using T = IntraTopology;
  LinkSpec port = g.intra;
  port.latency = Time::zero();
  // The direction a->b of the link just added.
  const auto last_link = [this] { return 2 * (static_cast<LinkDirection>(links_.size()) - 1); };
  switch (resolved_topology(g)) {
    case T::kMesh:
      for (size_t i = 0; i < gv.size(); ++i) {
        for (size_t j = i + 1; j < gv.size(); ++j) add_link(gv[i], gv[j], g.intra);
      }
      break;
    case T::kSwitch:
      if (gv.size() > 1) {
        // A star: the switch carries the latency, each GPU's port the bandwidth.
        const int sw =
            add_switch(fmt::format("node{}/{}", n, to_string(g.intra.kind)), g.intra.latency);
        for (int v : gv) add_link(v, sw, port);
      }
      break;
    case T::kHybridCubeMesh: {
      for (size_t i = 0; i < 8; ++i) {
        for (size_t j = i + 1; j < 8; ++j) {
          if (kDgx1Bricks[i][j] == 0) continue;
          LinkSpec l = g.intra;
          l.bytes_per_s *= kDgx1Bricks[i][j];
          add_link(gv[i], gv[j], l);
        }
      }
      const LinkSpec& pcie = *find_link_preset("pcie3");
      const int host = add_switch(fmt::format("node{}/pcie", n), pcie.latency);
      LinkSpec pport = pcie;
      pport.latency = Time::zero();
      for (int v : gv) add_link(v, host, pport);
      break;
    }
    case T::kTree: {
      const int bridge = add_switch(fmt::format("node{}/host", n), g.intra.latency);
      host_bridge = bridge;
      const auto per_switch = static_cast<size_t>(g.gpus_per_switch);
      for (size_t i = 0; i < gv.size(); i += per_switch) {
        const int sw = add_switch(fmt::format("node{}/plx{}", n, i / per_switch), g.intra.latency);
        add_link(sw, bridge, port);
        const LinkDirection to_bridge = last_link();
        for (size_t k = i; k < std::min(gv.size(), i + per_switch); ++k) {
          add_link(gv[k], sw, port);
          auto& path = up[static_cast<size_t>(first) + k];
          path = {};
          path.push_back(last_link());
          path.push_back(to_bridge);
        }
      }
      break;
    }
    case T::kDefault:
      break;
  }
}

Cluster ClusterBuilder::shorthand(const std::vector<NodeGroup>& groups, const LinkSpec& inter,
                                  const ShorthandOptions& o) {
  ClusterBuilder b;
  ShorthandLayout layout;
  layout.nics = o.nics;
  std::vector<std::vector<int>> gpu_vertices;
  std::vector<const NodeGroup*> group_of;  // [node]
  for (const NodeGroup& g : groups) {
    if (resolved_topology(g) == IntraTopology::kHybridCubeMesh && g.gpus_per_node != 8) {
      throw InputError(fmt::format("a hybrid cube-mesh joins 8 GPUs, not {}", g.gpus_per_node),
                       "gpus_per_node: 8");
    }
    const int model = static_cast<int>(group_of.size());
    for (int k = 0; k < g.nodes; ++k) {
      const int n = static_cast<int>(group_of.size());
      group_of.push_back(&g);
      layout.model_node.push_back(model);
      layout.first_device.push_back(static_cast<int>(b.devices_.size()));
      gpu_vertices.emplace_back();
      for (int i = 0; i < g.gpus_per_node; ++i) {
        const int dev = b.add_gpu(fmt::format("node{}/gpu{}", n, i), g.gpu, n);
        gpu_vertices.back().push_back(b.gpu_vertex(dev));
      }
    }
  }
  const int nodes = static_cast<int>(group_of.size());
  layout.first_device.push_back(static_cast<int>(b.devices_.size()));
  layout.up.resize(b.devices_.size());
  std::vector<int> host_bridge(static_cast<size_t>(nodes), -1);  // where a tree's NIC hangs
  for (int n = 0; n < nodes; ++n) {
    layout.first_link.push_back(static_cast<int>(b.links_.size()));
    b.add_node_links(*group_of[static_cast<size_t>(n)], n, gpu_vertices[static_cast<size_t>(n)],
                     layout.first_device[static_cast<size_t>(n)], layout.up,
                     host_bridge[static_cast<size_t>(n)]);
    layout.end_link.push_back(static_cast<int>(b.links_.size()));
  }
  if (nodes > 1) b.add_fabric(inter, o, gpu_vertices, host_bridge, layout);
  Cluster c = b.build();
  c.set_layout(std::move(layout));
  return c;
}

// The NICs of every node and the fabric joining them (one switch, or leaves and a spine).
void ClusterBuilder::add_fabric(const LinkSpec& inter, const ShorthandOptions& o,
                                const std::vector<std::vector<int>>& gpu_vertices,
                                const std::vector<int>& host_bridge, ShorthandLayout& layout) {
  const int nodes = static_cast<int>(gpu_vertices.size());
  const auto last_link = [this] { return 2 * (static_cast<LinkDirection>(links_.size()) - 1); };
  LinkSpec uplink = inter;
  uplink.latency = Time::zero();
  const LinkSpec host{"host", LinkKind::kHost, std::numeric_limits<double>::infinity(),
                      Time::zero()};
  std::vector<int> nic_parent(static_cast<size_t>(nodes));
  if (o.nodes_per_leaf > 0) {
    const int spine = add_switch("spine", o.spine_latency);
    LinkSpec leaf_up = inter;
    leaf_up.latency = Time::zero();
    leaf_up.bytes_per_s = inter.bytes_per_s * o.nodes_per_leaf * o.nics / o.oversubscription;
    int leaf = -1;
    for (int n = 0; n < nodes; ++n) {
      if (n % o.nodes_per_leaf == 0) {
        leaf = add_switch(fmt::format("leaf{}", n / o.nodes_per_leaf), inter.latency);
        add_link(leaf, spine, leaf_up);
        layout.leaf_up.push_back(last_link());
      }
      nic_parent[static_cast<size_t>(n)] = leaf;
      layout.leaf_of.push_back(static_cast<int>(layout.leaf_up.size()) - 1);
    }
  } else {
    const int fabric = add_switch("fabric", inter.latency);
    std::fill(nic_parent.begin(), nic_parent.end(), fabric);
  }
  for (int n = 0; n < nodes; ++n) {
    const auto& gv = gpu_vertices[static_cast<size_t>(n)];
    const auto first = static_cast<size_t>(layout.first_device[static_cast<size_t>(n)]);
    const int per = static_cast<int>(gv.size());
    for (int k = 0; k < o.nics; ++k) {
      // Port k serves GPUs k, k + nics, ... of the node (one port: every GPU).
      const int nic = add_switch(o.nics == 1 ? fmt::format("node{}/nic", n)
                                             : fmt::format("node{}/nic{}", n, k));
      add_link(nic, nic_parent[static_cast<size_t>(n)], uplink);
      layout.nic_up.push_back(last_link());
      // One port hangs from a tree's host bridge; several are each attached to their own
      // GPUs (rail-optimized), as on nodes with a NIC beside each GPU.
      if (host_bridge[static_cast<size_t>(n)] >= 0 && o.nics == 1) {
        // GPUs reach it through the tree, on a port like the tree's own.
        const LinkSpec port = links_[static_cast<size_t>(*layout.up[first].begin() / 2)].spec;
        add_link(nic, host_bridge[static_cast<size_t>(n)], port);
        for (int i = k; i < per; i += o.nics)
          layout.up[first + static_cast<size_t>(i)].push_back(reversed(last_link()));
      } else {
        for (int i = k; i < per; i += o.nics) {
          add_link(gv[static_cast<size_t>(i)], nic, host);
          layout.up[first + static_cast<size_t>(i)] = {};
          layout.up[first + static_cast<size_t>(i)].push_back(last_link());
        }
      }
    }
  }
}

}  // namespace pipesim
