// Routes: the closed forms of the shorthand topologies against Dijkstra over the whole
// graph, for every pair of GPUs of every layout; and the route cache under threads.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>

#include "topology/cluster.h"
#include "topology/route_length.h"

namespace pipesim {
namespace {

using Topo = ClusterBuilder::IntraTopology;

void expect_same(const Route& a, const Route& b, int s, int d) {
  EXPECT_EQ(a.hops, b.hops) << s << "->" << d;
  EXPECT_EQ(a.latency, b.latency) << s << "->" << d;
  EXPECT_EQ(a.bottleneck_bytes_per_s, b.bottleneck_bytes_per_s) << s << "->" << d;
}

// The cached route, the searched one and the hops written without caching agree, and the
// route's latency is its links' plus every vertex its hops leave after the first.
void expect_same(const Cluster& c, int s, int d) {
  const Route searched = c.searched_route(s, d);
  expect_same(c.route(s, d), searched, s, d);
  std::vector<LinkDirection> hops{7};  // (overwritten)
  c.route_hops(s, d, hops);
  EXPECT_EQ(hops, searched.hops) << s << "->" << d;
  Time latency;
  for (size_t j = 0; j < hops.size(); ++j) {
    latency += c.link(hops[j] / 2).spec.latency;
    if (j > 0) latency += c.leaving_latency(hops[j]);
  }
  EXPECT_EQ(latency, searched.latency) << s << "->" << d;
}

struct Shape {
  int nodes, gpus;
  const char* intra;
  Topo topo;
  int nodes_per_leaf;
};

TEST(Routing, ShorthandClosedFormsEqualDijkstraForEveryPair) {
  const Shape shapes[] = {
      {1, 8, "nvlink3", Topo::kMesh, 0},           {3, 4, "nvlink3", Topo::kMesh, 0},
      {3, 4, "nvswitch", Topo::kSwitch, 0},        {2, 1, "nvswitch", Topo::kSwitch, 0},
      {3, 8, "nvlink2", Topo::kHybridCubeMesh, 0}, {3, 6, "pcie3", Topo::kTree, 0},
      {7, 2, "nvswitch", Topo::kSwitch, 3},        {5, 4, "pcie4", Topo::kTree, 2},
      {4, 8, "nvlink2", Topo::kHybridCubeMesh, 2}, {6, 3, "nvlink3", Topo::kMesh, 1},
  };
  for (const Shape& sh : shapes) {
    ClusterBuilder::ShorthandOptions o;
    o.intra = sh.topo;
    o.gpus_per_switch = 4;
    o.nodes_per_leaf = sh.nodes_per_leaf;
    o.oversubscription = 2;
    o.spine_latency = Time::ns(700);
    LinkSpec intra = *find_link_preset(sh.intra);
    intra.latency = Time::ns(300);  // switches and bridges of the trees take time to cross
    const Cluster c = ClusterBuilder::shorthand(sh.nodes, sh.gpus, *find_gpu_preset("v100-16gb"),
                                                intra, *find_link_preset("ib-hdr"), o);
    SCOPED_TRACE(::testing::Message() << sh.nodes << "x" << sh.gpus << " " << sh.intra);
    for (int s = 0; s < c.num_devices(); ++s) {
      for (int d = 0; d < c.num_devices(); ++d) {
        if (s != d) expect_same(c, s, d);
      }
    }
  }
}

TEST(Routing, SeveralNicsPerNodeRouteByRail) {
  // Every route of a shorthand cluster with 2, 3 or 4 ports per node is the searched one,
  // and GPU g of a node leaves through its port g mod nics.
  for (const int nics : {2, 3, 4}) {
    for (const auto& [intra, topo, leaf] :
         {std::tuple{"nvswitch", Topo::kSwitch, 0}, std::tuple{"pcie4", Topo::kTree, 2},
          std::tuple{"nvlink2", Topo::kHybridCubeMesh, 0}}) {
      ClusterBuilder::ShorthandOptions o;
      o.intra = topo;
      o.gpus_per_switch = 4;
      o.nodes_per_leaf = leaf;
      o.nics = nics;
      const Cluster c =
          ClusterBuilder::shorthand(4, 8, *find_gpu_preset("h100-80gb"), *find_link_preset(intra),
                                    *find_link_preset("ib-ndr"), o);
      SCOPED_TRACE(::testing::Message() << nics << " nics, " << intra);
      for (int s = 0; s < c.num_devices(); ++s) {
        for (int d = 0; d < c.num_devices(); ++d) {
          if (s != d) expect_same(c, s, d);
        }
      }
      // node0/gpu5 to node1/gpu5 through port 5 mod nics on both nodes.
      bool out = false, in = false;
      const std::string port = fmt::format("nic{}", 5 % nics);
      for (const LinkDirection h : c.route(5, 8 + 5).hops) {
        const std::string name = c.direction_name(h);
        out = out || name.starts_with("node0/" + port);
        in = in || name.find("->node1/" + port) != std::string::npos;
      }
      EXPECT_TRUE(out && in);
    }
  }
}

TEST(Routing, IntraNodeLatencySoLongThatTheNicWins) {
  // 2e6 s on each NVLink: GPU -> NVLink -> GPU weighs 2^40 + 4e18 ps, above the two host
  // attachments' 2 x 2^60, so GPUs of one node talk through their NIC and the first
  // node's route cannot be moved to the others' links.
  LinkSpec intra = *find_link_preset("nvlink3");
  intra.latency = Time::s(2'000'000);
  const Cluster c = ClusterBuilder::shorthand(3, 4, *find_gpu_preset("v100-16gb"), intra,
                                              *find_link_preset("ib-hdr"));
  for (int s = 0; s < c.num_devices(); ++s) {
    for (int d = 0; d < c.num_devices(); ++d) {
      if (s != d) expect_same(c, s, d);
    }
  }
  EXPECT_EQ(c.route(5, 6).latency, Time::zero());  // host attachments and the NIC
}

TEST(Routing, MovingWholeNodesMapsRoutesOntoRoutes) {
  // Where the nodes are interchangeable, moving GPU i of node a to GPU i of node b moves
  // each hop of every route to moved_link's counterpart: checked for every pair of GPUs
  // with nodes 0, 1, 2, 3 moved to 2, 3, 0, 1, for every intra-node shape and 1 or 4
  // ports a node.
  for (const int nics : {1, 4}) {
    for (const auto& [intra, topo] :
         {std::pair{"nvswitch", Topo::kSwitch}, std::pair{"pcie4", Topo::kTree},
          std::pair{"nvlink2", Topo::kHybridCubeMesh}, std::pair{"nvlink3", Topo::kMesh}}) {
      ClusterBuilder::ShorthandOptions o;
      o.intra = topo;
      o.gpus_per_switch = 4;
      o.nics = nics;
      const Cluster c =
          ClusterBuilder::shorthand(4, 8, *find_gpu_preset("h100-80gb"), *find_link_preset(intra),
                                    *find_link_preset("ib-ndr"), o);
      SCOPED_TRACE(::testing::Message() << nics << " nics, " << intra);
      ASSERT_TRUE(c.nodes_interchangeable());
      for (LinkDirection h = 0; h < 2 * c.num_links(); ++h) {
        ASSERT_EQ(c.moved_link(h, c.link_node(h)), h);
        const auto [inside, fabric] = c.node_links(c.link_node(h));
        const bool own = (h / 2 >= inside.first && h / 2 < inside.second) ||
                         (h / 2 >= fabric.first && h / 2 < fabric.second);
        ASSERT_TRUE(own) << h;
        // A moved link has the same bandwidth and latency, and leaves a vertex of the same.
        const LinkDirection m = c.moved_link(h, (c.link_node(h) + 1) % 4);
        EXPECT_EQ(c.direction_bandwidth(m), c.direction_bandwidth(h));
        EXPECT_EQ(c.link(m / 2).spec.latency, c.link(h / 2).spec.latency);
        EXPECT_EQ(c.leaving_latency(m), c.leaving_latency(h));
      }
      const auto move = [](int d) { return (d + 16) % 32; };  // nodes 0, 1 -> 2, 3 -> 0, 1
      for (int s = 0; s < 32; ++s) {
        for (int d = 0; d < 32; ++d) {
          if (s == d) continue;
          // (Each hop belongs to the source's or the destination's node: it moves with it.)
          std::vector<LinkDirection> moved;
          for (const LinkDirection h : c.route(s, d).hops)
            moved.push_back(c.moved_link(h, (c.link_node(h) + 2) % 4));
          EXPECT_EQ(moved, c.route(move(s), move(d)).hops) << s << "->" << d;
        }
      }
    }
  }
}

TEST(Routing, NodesAreInterchangeableOnlyUnderOneSwitchAlikeAndUnslowed) {
  const GpuSpec h100 = *find_gpu_preset("h100-80gb");
  const LinkSpec nvswitch = *find_link_preset("nvswitch"), ndr = *find_link_preset("ib-ndr");
  EXPECT_TRUE(ClusterBuilder::shorthand(4, 8, h100, nvswitch, ndr).nodes_interchangeable());
  // One node: nothing to move onto.
  EXPECT_FALSE(ClusterBuilder::shorthand(1, 8, h100, nvswitch, ndr).nodes_interchangeable());
  // Leaves and a spine: a node's moves change which routes cross the spine.
  ClusterBuilder::ShorthandOptions leaves;
  leaves.nodes_per_leaf = 2;
  EXPECT_FALSE(
      ClusterBuilder::shorthand(4, 8, h100, nvswitch, ndr, leaves).nodes_interchangeable());
  // Two kinds of node.
  ClusterBuilder::NodeGroup a{2, 8, h100, nvswitch}, b{2, 8, *find_gpu_preset("a100-80gb"),
                                                        *find_link_preset("nvswitch")};
  b.intra.bytes_per_s /= 2;
  EXPECT_FALSE(ClusterBuilder::shorthand({a, b}, ndr, {}).nodes_interchangeable());
  // A slowed link, until the slowdowns are off.
  Cluster slowed = ClusterBuilder::shorthand(4, 8, h100, nvswitch, ndr);
  slowed.slow_down_link(3, 0.5);
  EXPECT_FALSE(slowed.nodes_interchangeable());
  slowed.set_slowdowns(false);
  EXPECT_TRUE(slowed.nodes_interchangeable());
  // A slowed GPU moves no link.
  Cluster straggler = ClusterBuilder::shorthand(4, 8, h100, nvswitch, ndr);
  straggler.slow_down_device(3, 2.0);
  EXPECT_TRUE(straggler.nodes_interchangeable());
}

TEST(Routing, ThreadsShareOneCluster) {
  // Four threads ask for every route of a cluster at once, in different orders; each
  // gets the route Dijkstra finds, and the references they hold stay valid.
  const Cluster c =
      ClusterBuilder::shorthand(8, 8, *find_gpu_preset("a100-80gb"), *find_link_preset("nvswitch"),
                                *find_link_preset("ib-hdr"));
  const int n = c.num_devices();
  std::vector<std::vector<const Route*>> got(4, std::vector<const Route*>(n * n, nullptr));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < n * n; ++k) {
        const int i = t % 2 == 0 ? k : n * n - 1 - k;
        if (i / n != i % n) got[t][i] = &c.route(i / n, i % n);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < n * n; ++i) {
    if (i / n == i % n) continue;
    for (int t = 1; t < 4; ++t) ASSERT_EQ(got[t][i], got[0][i]);  // one cached route
    expect_same(*got[0][i], c.searched_route(i / n, i % n), i / n, i % n);
  }
}

// A chain of n GPUs (g0 - g1 - ... - g(n-1)), or a ring when `closed`.
Cluster gpu_chain(int n, bool closed) {
  ClusterBuilder b;
  for (int i = 0; i < n; ++i) b.add_gpu(fmt::format("g{}", i), *find_gpu_preset("a100-80gb"));
  const LinkSpec nvlink = *find_link_preset("nvlink3");
  for (int i = 0; i + 1 < n; ++i) b.add_link(b.gpu_vertex(i), b.gpu_vertex(i + 1), nvlink);
  if (closed) b.add_link(b.gpu_vertex(n - 1), b.gpu_vertex(0), nvlink);
  return b.build();
}

TEST(Routing, LongestRouteOfChainsRingsAndShorthandClusters) {
  // Worked by hand: a chain of 7 GPUs is 6 links end to end; a ring of 8 is 4 links to the
  // GPU opposite (the double sweep finds it: 0's farthest is 4, and 4's is 0); one GPU has
  // no route.
  EXPECT_EQ(longest_route_hops(gpu_chain(7, false)), 6);
  EXPECT_EQ(longest_route_hops(gpu_chain(8, true)), 4);
  EXPECT_EQ(longest_route_hops(gpu_chain(1, false)), 0);
  // Shorthand clusters: the longest searched route over every pair, which the double sweep
  // may undercount at most by half (cycles through switches).
  for (const auto& [nodes, intra, topo] :
       {std::tuple{1, "nvswitch", Topo::kSwitch}, std::tuple{3, "nvlink3", Topo::kMesh},
        std::tuple{4, "nvlink2", Topo::kHybridCubeMesh}, std::tuple{5, "pcie4", Topo::kTree}}) {
    ClusterBuilder::ShorthandOptions o;
    o.intra = topo;
    o.nodes_per_leaf = 2;
    const Cluster c = ClusterBuilder::shorthand(nodes, 8, *find_gpu_preset("a100-80gb"),
                                                *find_link_preset(intra),
                                                *find_link_preset("ib-hdr"), o);
    size_t longest = 0;
    for (int s = 0; s < c.num_devices(); ++s)
      for (int d = 0; d < c.num_devices(); ++d)
        if (s != d) longest = std::max(longest, c.searched_route(s, d).hops.size());
    const int got = longest_route_hops(c);
    EXPECT_LE(got, static_cast<int>(longest)) << intra;
    EXPECT_GE(2 * got, static_cast<int>(longest)) << intra;
  }
}

TEST(Routing, NamesAreFoundByLookUp) {
  // Names map to their vertex and device in the built cluster and its copies; a switch's
  // name is a vertex but no device; a missing name is -1.
  const Cluster c = ClusterBuilder::shorthand(2, 4, *find_gpu_preset("a100-80gb"),
                                              *find_link_preset("nvswitch"),
                                              *find_link_preset("ib-hdr"));
  const Cluster copy = c;
  for (int d = 0; d < c.num_devices(); ++d) {
    EXPECT_EQ(copy.device_index(c.device(d).name), d);
    EXPECT_EQ(copy.vertex_index(c.device(d).name), c.device(d).vertex);
  }
  EXPECT_EQ(c.device_index("node1/gpu3"), 7);
  EXPECT_GE(c.vertex_index("node0/nvswitch"), 0);
  EXPECT_EQ(c.device_index("node0/nvswitch"), -1);
  EXPECT_EQ(c.vertex_index("node9/gpu0"), -1);
  EXPECT_EQ(c.device_index("node9/gpu0"), -1);
}

}  // namespace
}  // namespace pipesim
