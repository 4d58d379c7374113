// The cluster: GPUs, switches and the links between them, held as a Boost.Graph, plus
// routes between any two GPUs. ClusterBuilder is the small construction API; the YAML
// scenario is one front end to it (see STYLE.md, "a small builder API for topologies").
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/time.h"
#include "topology/presets.h"

namespace pipesim {

struct Device {
  std::string name;
  GpuSpec gpu;
  int node = 0;     // server the GPU sits in (placement policies group by it)
  int vertex = -1;  // vertex in the graph
  // A straggler (`cluster.slowdown`, SPEC section 10): every compute op on this GPU takes
  // this many times as long (>= 1).
  double slowdown = 1.0;
};

struct Link {
  int a = -1, b = -1;  // vertices; direction 0 is a->b, direction 1 is b->a
  LinkSpec spec;
};

// A link direction: 2 * link + (0 for a->b, 1 for b->a). Bandwidth is per direction.
using LinkDirection = int32_t;

struct ShorthandLayout;  // a shorthand cluster's layout (topology/internal/shorthand_layout.h)

// A GPU's way up to its node's NIC in a shorthand cluster: at most its PCIe switch's link,
// the host bridge's and the NIC's port (held in place: routes read thousands of them).
struct UpPath {
  std::array<LinkDirection, 3> hops{};
  uint8_t n = 0;
  void push_back(LinkDirection d);
  const LinkDirection* begin() const { return hops.data(); }
  const LinkDirection* end() const { return hops.data() + n; }
};

struct Route {
  std::vector<LinkDirection> hops;
  Time latency;                       // sum of link latencies plus the switches crossed
  double bottleneck_bytes_per_s = 0;  // min over hops; +infinity when all hops are unlimited
};

class Cluster {
 public:
  // A copy has the same devices and links, and shares the routes found so far (they depend
  // on nothing else) until either changes its slowdowns.
  Cluster(const Cluster&);
  Cluster& operator=(const Cluster&);
  Cluster(Cluster&&) noexcept;
  Cluster& operator=(Cluster&&) noexcept;
  ~Cluster();

  int num_devices() const { return static_cast<int>(devices_.size()); }
  const Device& device(int i) const { return devices_.at(static_cast<size_t>(i)); }
  const std::vector<Device>& devices() const { return devices_; }
  int num_nodes() const { return num_nodes_; }
  int num_links() const { return static_cast<int>(links_.size()); }
  int num_vertices() const { return static_cast<int>(vertex_names_.size()); }  // GPUs, switches
  // Every GPU holds as much memory and is slowed as much by its own communication
  // (GpuSpec::memory_bytes, comm_interference): what the copies' fold checks per device.
  bool same_memory() const { return same_memory_; }
  // Every GPU reserves as much memory and pays as long a launch (GpuSpec::reserved_bytes,
  // launch_overhead): the lowering then need not read them GPU by GPU.
  bool same_overheads() const { return same_overheads_; }
  // [device]: its node, in one flat table (the lowering's hierarchical collectives).
  const std::vector<int>& device_nodes() const { return device_nodes_; }
  // Names one state of the cluster: a copy keeps it, a slowdown (or turning them off or
  // on) gives a new one, no two clusters built share one. What is worked out from a cluster
  // (a graph's fold, TaskGraph::keep_fold) may be kept against it.
  uint64_t revision() const { return revision_; }
  // Built by the shorthand (routes in closed form), not given as a graph (Dijkstra's).
  bool shorthand() const;
  const Link& link(int i) const { return links_.at(static_cast<size_t>(i)); }
  const std::string& vertex_name(int v) const { return vertex_names_.at(static_cast<size_t>(v)); }
  std::string direction_name(LinkDirection d) const;  // "node0/gpu0->node0/gpu1"
  double direction_bandwidth(LinkDirection d) const {
    return links_[static_cast<size_t>(d / 2)].spec.bytes_per_s;
  }
  int device_index(const std::string& name) const;  // -1 when absent
  int vertex_index(const std::string& name) const;  // a GPU, switch or NIC; -1 when absent

  // `cluster.slowdown` (SPEC section 10), applied after presets and before any route is
  // used: GPU `device` computes `factor` times slower; link `link` carries `share` of its
  // bandwidth, both directions (a degraded cable).
  void slow_down_device(int device, double factor);
  void slow_down_link(int link, double share);
  // The slowdowns applied, in order: a GPU's compute factor or a link's bandwidth share.
  struct Slowdown {
    bool link = false;
    int index = -1;  // device or link
    double factor = 1;
  };
  const std::vector<Slowdown>& slowdowns() const { return slowdowns_; }
  // Off: every GPU and link at its own figures again (what the slowdowns cost is the
  // difference); on: as given. Either clears the cached routes.
  void set_slowdowns(bool on);
  // The links joining vertices a and b directly (parallel links included).
  std::vector<int> links_between(int vertex_a, int vertex_b) const;
  // Network ports per node (`inter_node.nics`; 1 for an explicit graph), and the port GPU
  // `device` leaves its node through, numbered over the cluster: node x ports + (its index
  // in the node mod ports), rail-optimized as the shorthand builds it; the node for an
  // explicit graph.
  int nics_per_node() const;
  int nic_of(int device) const;
  // GPUs of node `node` (node 0's: a server's, as the planner sizes groups).
  int gpus_of_node(int node) const;

  // Route between two GPUs: fewest hops, then least latency; host attachments (GPU to
  // NIC) are used only when nothing else reaches. Computed on first use and cached; safe
  // to call from several threads at once. A shorthand cluster composes it in closed form
  // (the GPU's way up to its NIC, the fabric, the way down; inside a node, the first node's
  // route moved over); an explicit graph runs Dijkstra from the source on first use.
  const Route& route(int src_device, int dst_device) const;
  // Its hops, written into `hops` without keeping the route where it has a closed form: for
  // checks that look at many routes once each (the copies' images, sim/copies.cc).
  void route_hops(int src_device, int dst_device, std::vector<LinkDirection>& hops) const;
  // What crossing the vertex a direction leaves adds to a route's latency (a switch's; the
  // route's first vertex adds nothing).
  Time leaving_latency(LinkDirection d) const;
  // Whether moving whole nodes onto one another (GPU i of a node onto GPU i of another)
  // maps the cluster onto itself: routes onto routes, each link onto one of its bandwidth
  // and latency. So it is for a shorthand cluster of one node kind under one fabric switch
  // with no link slowed. Then every link direction belongs to one node (link_node), and
  // moved_link gives its counterpart in another.
  bool nodes_interchangeable() const;
  int link_node(LinkDirection d) const;
  LinkDirection moved_link(LinkDirection d, int to_node) const;
  // Node `node`'s links (nodes_interchangeable()): [first, end) inside it, then to the
  // fabric, each laid out as every other node's.
  std::array<std::pair<int, int>, 2> node_links(int node) const;
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
  // The closed-form route's hops into `hops`; false where there is none (inside a node,
  // a route through the NIC).
  bool shorthand_hops(int src_device, int dst_device, std::vector<LinkDirection>& hops) const;
  const Route& searched_and_cached(RouteShard& shard, int64_t key, int src_device,
                                   int dst_device) const;
  // Before a change of bandwidths: routes of its own, the shared ones left to the copies.
  void own_routes();
  void renew_revision();
  void set_layout(ShorthandLayout layout);  // the shorthand builder's, for closed-form routes
  std::shared_ptr<Impl> impl_;
  uint64_t revision_ = 0;
  std::vector<Device> devices_;
  std::vector<Link> links_;
  std::vector<std::string> vertex_names_;
  std::vector<Time> vertex_latency_;
  int num_nodes_ = 1;
  bool same_memory_ = true;
  bool same_overheads_ = true;
  std::vector<int> device_nodes_;
  std::vector<Slowdown> slowdowns_;
  std::vector<double> full_bandwidth_;  // [link] before any slowdown; empty: none applied
  bool slowdowns_on_ = true;
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
  // `nodes` servers of one kind (`cluster.node_groups`): their GPU, GPUs per node and the
  // links inside each.
  struct NodeGroup {
    int nodes = 1;
    int gpus_per_node = 1;
    GpuSpec gpu;
    LinkSpec intra;
    IntraTopology topology = IntraTopology::kDefault;
    int gpus_per_switch = 2;
  };
  struct ShorthandOptions {
    // The shape inside a node when every node is alike (the groups give their own).
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
  // A heterogeneous cluster: the groups' nodes numbered group by group, every node on the
  // one fabric of `inter` (SPEC section 10). `options.nics` must not exceed any group's
  // GPUs per node.
  static Cluster shorthand(const std::vector<NodeGroup>& groups, const LinkSpec& inter,
                           const ShorthandOptions& options);

 private:
  struct Vertex {
    std::string name;
    int device = -1;
    Time latency;
  };
  void add_node_links(const NodeGroup& g, int n, const std::vector<int>& gpu_vertices, int first,
                      std::vector<UpPath>& up, int& host_bridge);
  void add_fabric(const LinkSpec& inter, const ShorthandOptions& o,
                  const std::vector<std::vector<int>>& gpu_vertices,
                  const std::vector<int>& host_bridge, ShorthandLayout& layout);
  std::vector<Vertex> vertices_;
  std::unordered_map<std::string, int> vertex_by_name_;  // the first vertex of each name
  std::vector<Device> devices_;
  std::vector<Link> links_;
};

}  // namespace pipesim
