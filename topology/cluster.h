// The cluster: GPUs, switches and the links between them, held as a Boost.Graph, plus
// routes between any two GPUs. ClusterBuilder is the small construction API; the YAML
// scenario is one front end to it (see STYLE.md, "a small builder API for topologies").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"
#include "topology/presets.h"

namespace pipesim {

struct Device {
  std::string name;
  GpuSpec gpu;
  int node = 0;     // server the GPU sits in (placement policies group by it)
  int vertex = -1;  // vertex in the graph
};

struct Link {
  int a = -1, b = -1;  // vertices; direction 0 is a->b, direction 1 is b->a
  LinkSpec spec;
};

// A link direction: 2 * link + (0 for a->b, 1 for b->a). Bandwidth is per direction.
using LinkDirection = int32_t;

struct Route {
  std::vector<LinkDirection> hops;
  Time latency;                       // sum of link latencies plus the switches crossed
  double bottleneck_bytes_per_s = 0;  // min over hops; +infinity when all hops are unlimited
};

class Cluster {
 public:
  Cluster(Cluster&&) noexcept;
  Cluster& operator=(Cluster&&) noexcept;
  ~Cluster();

  int num_devices() const { return static_cast<int>(devices_.size()); }
  const Device& device(int i) const { return devices_.at(static_cast<size_t>(i)); }
  const std::vector<Device>& devices() const { return devices_; }
  int num_nodes() const { return num_nodes_; }
  int num_links() const { return static_cast<int>(links_.size()); }
  const Link& link(int i) const { return links_.at(static_cast<size_t>(i)); }
  const std::string& vertex_name(int v) const { return vertex_names_.at(static_cast<size_t>(v)); }
  std::string direction_name(LinkDirection d) const;  // "node0/gpu0->node0/gpu1"
  double direction_bandwidth(LinkDirection d) const {
    return links_[static_cast<size_t>(d / 2)].spec.bytes_per_s;
  }
  int device_index(const std::string& name) const;  // -1 when absent
  // Network ports per node (`inter_node.nics`; 1 for an explicit graph), and the port GPU
  // `device` leaves its node through, numbered over the cluster: node x ports + (its index
  // in the node mod ports), rail-optimized as the shorthand builds it; the node for an
  // explicit graph.
  int nics_per_node() const;
  int nic_of(int device) const;

  // Route between two GPUs: fewest hops, then least latency; host attachments (GPU to
  // NIC) are used only when nothing else reaches. Computed on first use and cached; safe
  // to call from several threads at once. A shorthand cluster composes it in closed form
  // (the GPU's way up to its NIC, the fabric, the way down; inside a node, the first node's
  // route moved over); an explicit graph runs Dijkstra from the source on first use.
  const Route& route(int src_device, int dst_device) const;
  // The same route found by Dijkstra over the whole graph, whatever the cluster's shape
  // (the reference the closed forms are tested against). Not cached.
  Route searched_route(int src_device, int dst_device) const;
  // latency(path) + bytes / bottleneck_bandwidth(path), the cost on an idle path.
  Time transfer_time(int src_device, int dst_device, int64_t bytes) const;
  static Time transfer_time(const Route& route, int64_t bytes);

 private:
  friend class ClusterBuilder;
  Cluster();
  struct Impl;
  struct RouteShard;
  Route make_route(std::vector<LinkDirection> hops) const;
  std::optional<std::vector<LinkDirection>> shorthand_hops(int src_device, int dst_device) const;
  const Route& searched_and_cached(RouteShard& shard, int64_t key, int src_device,
                                   int dst_device) const;
  std::unique_ptr<Impl> impl_;
  std::vector<Device> devices_;
  std::vector<Link> links_;
  std::vector<std::string> vertex_names_;
  std::vector<Time> vertex_latency_;
  int num_nodes_ = 1;
};

class ClusterBuilder {
 public:
  int add_gpu(std::string name, GpuSpec gpu, int node = 0);       // returns the device index
  int add_switch(std::string name, Time latency = Time::zero());  // returns the vertex
  int vertex_of(const std::string& name) const;                   // -1 when absent
  int gpu_vertex(int device) const { return devices_.at(static_cast<size_t>(device)).vertex; }
  void add_link(int vertex_a, int vertex_b, LinkSpec spec);
  // Throws InputError if a name repeats or some GPU cannot reach another.
  Cluster build();

  // nodes x gpus_per_node. Inside a node (ShorthandOptions::intra):
  //   mesh              a link between every pair of GPUs (NVLink's default);
  //   switch            a star through one node switch whose traversal is the latency and
  //                     whose ports carry the bandwidth (NVSwitch's and PCIe's default);
  //   hybrid-cube-mesh  DGX-1 (8 GPUs): NVLink bricks of `intra` bandwidth between the
  //                     nvidia-smi topo pairs (some doubled), other pairs through a PCIe
  //                     host switch (pcie3);
  //   tree              PCIe: gpus_per_switch GPUs under each PCIe switch, the switches
  //                     under a host bridge, which also holds the NIC; each traversal is the
  //                     latency, every link the bandwidth.
  // With several nodes, one NIC per node of `inter` bandwidth into one fabric switch whose
  // traversal is `inter.latency`; or, with nodes_per_leaf > 0, a leaf/spine fabric: nodes
  // under leaf switches (traversal `inter.latency`), each leaf's uplink to one logical
  // spine carrying nodes_per_leaf x inter bandwidth / oversubscription (crossing the spine
  // adds spine_latency).
  enum class IntraTopology { kDefault, kMesh, kSwitch, kHybridCubeMesh, kTree };
  struct ShorthandOptions {
    IntraTopology intra = IntraTopology::kDefault;
    int gpus_per_switch = 2;
    int nodes_per_leaf = 0;  // 0: one fabric switch
    double oversubscription = 1.0;
    Time spine_latency;
    // Network ports per node, each of the inter-node link's bandwidth: GPU g of a node sends
    // and receives through port g mod nics (rail-optimized, as on DGX/HGX nodes).
    int nics = 1;
  };
  static Cluster shorthand(int nodes, int gpus_per_node, const GpuSpec& gpu, const LinkSpec& intra,
                           const LinkSpec& inter, const ShorthandOptions& options);
  static Cluster shorthand(int nodes, int gpus_per_node, const GpuSpec& gpu, const LinkSpec& intra,
                           const LinkSpec& inter) {
    return shorthand(nodes, gpus_per_node, gpu, intra, inter, ShorthandOptions{});
  }

 private:
  struct Vertex {
    std::string name;
    int device = -1;
    Time latency;
  };
  std::vector<Vertex> vertices_;
  std::vector<Device> devices_;
  std::vector<Link> links_;
};

}  // namespace pipesim
