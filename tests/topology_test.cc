// Presets, cluster graphs, routes, transfer costs and placement.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/units.h"
#include "tests/support.h"
#include "topology/cluster.h"
#include "topology/placement.h"

namespace pipesim {
namespace {

const GpuSpec& v100() {
  return *find_gpu_preset("v100-16gb");
}

TEST(Presets, EveryNamedPresetExists) {
  for (const char* g : {"v100-16gb", "v100-32gb", "a100-40gb", "a100-80gb", "h100-80gb", "h200",
                        "b200", "gb200", "b300", "gb300", "mi300x"}) {
    ASSERT_NE(find_gpu_preset(g), nullptr) << g;
    EXPECT_GT(find_gpu_preset(g)->memory_bytes, 0);
    EXPECT_GT(find_gpu_preset(g)->peak_flops, 0);
  }
  for (const char* l :
       {"nvlink2", "nvlink3", "nvlink4", "nvswitch", "pcie3", "pcie4", "pcie5", "eth10", "eth25",
        "eth100", "eth400", "ib-hdr", "ib-ndr", "nvlink5", "pcie6", "eth800", "ib-xdr"}) {
    ASSERT_NE(find_link_preset(l), nullptr) << l;
    EXPECT_GT(find_link_preset(l)->bytes_per_s, 0);
  }
  // Datasheet figures: 80 GiB of HBM on an A100-80GB; 25 Gbit/s Ethernet is 3.125 GB/s.
  EXPECT_EQ(find_gpu_preset("a100-80gb")->memory_bytes, 80LL << 30);
  EXPECT_DOUBLE_EQ(find_link_preset("eth25")->bytes_per_s, 3.125e9);
  EXPECT_DOUBLE_EQ(find_link_preset("ib-ndr")->bytes_per_s, 50e9);
  // Dense rates, per GPU (docs/presets.md): the HGX B200's 72 PFLOPS of sparse fp8 over 8
  // GPUs, halved; GB200 NVL72's 720 over 72, halved; H200 as H100 but 141 GB at 4.8 TB/s;
  // MI300X as AMD prints it. No fp8 before Hopper.
  EXPECT_DOUBLE_EQ(find_gpu_preset("b200")->fp8_flops, 72e15 / 8 / 2);
  EXPECT_DOUBLE_EQ(find_gpu_preset("b200")->peak_flops, 36e15 / 8 / 2);
  EXPECT_DOUBLE_EQ(find_gpu_preset("gb200")->fp8_flops, 720e15 / 72 / 2);
  EXPECT_EQ(find_gpu_preset("h200")->memory_bytes, 141'000'000'000);
  EXPECT_DOUBLE_EQ(find_gpu_preset("h200")->hbm_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(find_gpu_preset("mi300x")->peak_flops, 1307.4e12);
  EXPECT_DOUBLE_EQ(find_gpu_preset("mi300x")->fp8_flops, 2614.9e12);
  EXPECT_EQ(find_gpu_preset("a100-80gb")->fp8_flops, 0);
  EXPECT_DOUBLE_EQ(find_gpu_preset("h100-80gb")->fp8_flops, 1979e12);
  // Blackwell Ultra: the HGX B300's 72 / 36 PFLOPS of sparse fp8 / 16-bit over 8 GPUs,
  // halved; GB300 NVL72's 720 / 360 over 72, halved (the GB200's rates); 288 GB each.
  EXPECT_DOUBLE_EQ(find_gpu_preset("b300")->fp8_flops, 72e15 / 8 / 2);
  EXPECT_DOUBLE_EQ(find_gpu_preset("b300")->peak_flops, 36e15 / 8 / 2);
  EXPECT_DOUBLE_EQ(find_gpu_preset("gb300")->fp8_flops, 720e15 / 72 / 2);
  EXPECT_DOUBLE_EQ(find_gpu_preset("gb300")->peak_flops, 360e15 / 72 / 2);
  EXPECT_EQ(find_gpu_preset("gb300")->memory_bytes, 288'000'000'000);
  EXPECT_EQ(find_gpu_preset("b300")->memory_bytes, 288'000'000'000);
  // ConnectX-8: 800 Gbit/s a port.
  EXPECT_DOUBLE_EQ(find_link_preset("ib-xdr")->bytes_per_s, 100e9);
  // NVLink 5: 1.8 TB/s both ways per GPU.
  EXPECT_DOUBLE_EQ(find_link_preset("nvlink5")->bytes_per_s, 900e9);
  // The A100s, the H100 and Blackwell have curves fitted to their own runs; the others say
  // whose they borrow.
  for (const char* g : {"v100-16gb", "h200", "mi300x", "b300", "gb300"})
    EXPECT_TRUE(find_gpu_preset(g)->curves_borrowed) << g;
  for (const char* g : {"a100-80gb", "h100-80gb", "b200", "gb200"})
    EXPECT_FALSE(find_gpu_preset(g)->curves_borrowed) << g;
  EXPECT_EQ(find_gpu_preset("h100-80gb")->curves, "H100 runs");
  EXPECT_EQ(find_gpu_preset("h200")->curves, "H100 runs");
  EXPECT_EQ(find_gpu_preset("b200")->curves, "B200 and GB200 runs");
  EXPECT_EQ(find_gpu_preset("gb200")->curves, "B200 and GB200 runs");
}

TEST(Presets, ModelCommandSaysWhereTheCurvesComeFrom) {
  const auto model = [](const std::string& gpu) {
    return test::cli(
        {"model",
         test::write_temp("curves.yaml", "cluster: {gpu: " + gpu +
                                             ", nodes: 1, gpus_per_node: 1}\n"
                                             "model: {include: llama3-8b}\n"
                                             "training: {global_batch: 1, micro_batch: 1, "
                                             "precision: bf16}\n"
                                             "strategy: {schedule: dapple, pipeline: 1}\n")});
  };
  const auto h = model("h200");
  EXPECT_EQ(h.code, 0) << h.err;
  EXPECT_NE(h.out.find("h200's efficiency curves are borrowed from the fit to H100 runs"),
            std::string::npos)
      << h.out;
  EXPECT_NE(model("a100-80gb").out.find("a100-80gb's efficiency curves: fitted to A100 runs"),
            std::string::npos);
  EXPECT_NE(model("h100-80gb").out.find("h100-80gb's efficiency curves: fitted to H100 runs"),
            std::string::npos);
  // The Hopper fit's share of compute lost beside the GPU's own transfers, said.
  EXPECT_NE(model("h100-80gb")
                .out.find("h100-80gb's compute runs 30 % slower while it sends "
                          "inside its server"),
            std::string::npos);
  EXPECT_EQ(model("a100-80gb").out.find("slower while it sends"), std::string::npos);
  EXPECT_NE(model("{name: x, memory: 8 GiB, peak: 10 TFLOPS}").out.find("flat 0.5"),
            std::string::npos);
  // Blackwell Ultra borrows Blackwell's fit and says what its datasheet changes in it, until
  // the scenario gives its own attention curve.
  const std::string u = model("gb300").out;
  EXPECT_NE(u.find("gb300's efficiency curves are borrowed from the fit to B200 and GB200 runs"),
            std::string::npos)
      << u;
  EXPECT_NE(u.find("gb300: attention kernels at twice Blackwell's level"), std::string::npos);
  EXPECT_EQ(model("b200").out.find("twice"), std::string::npos);
  const auto own =
      model("{preset: b300, attention_efficiency: [{flops: 0 GFLOP, efficiency: 0.4}]}");
  EXPECT_EQ(own.code, 0) << own.err;
  EXPECT_EQ(own.out.find("twice"), std::string::npos) << own.out;
  // The Triton kernel's curve alone leaves the CUDA kernels' doubled level, and says so.
  const auto triton =
      model("{preset: b300, triton_attention_efficiency: [{flops: 0 GFLOP, efficiency: 0.1}]}");
  EXPECT_EQ(triton.code, 0) << triton.err;
  EXPECT_NE(triton.out.find("b300: attention kernels at twice"), std::string::npos);
}

LinkSpec link(LinkKind k, double bw, Time lat) {
  return {"custom", k, bw, lat};
}

TEST(Cluster, ShorthandNamesAndCounts) {
  const Cluster c =
      ClusterBuilder::shorthand(2, 4, v100(), link(LinkKind::kNvLink, 50e9, Time::us(2)),
                                link(LinkKind::kEthernet, 3.125e9, Time::us(10)));
  ASSERT_EQ(c.num_devices(), 8);
  EXPECT_EQ(c.device(0).name, "node0/gpu0");
  EXPECT_EQ(c.device(5).name, "node1/gpu1");
  EXPECT_EQ(c.device(5).node, 1);
  EXPECT_EQ(c.num_nodes(), 2);
}

TEST(Cluster, PointToPointCostIsLatencyPlusBytesOverBottleneck) {
  const Cluster c =
      ClusterBuilder::shorthand(2, 4, v100(), link(LinkKind::kNvLink, 50e9, Time::us(2)),
                                link(LinkKind::kEthernet, 3.125e9, Time::us(10)));
  // Same node, NVLink mesh: one hop. 50 MB at 50 GB/s = 1 ms, plus 2 us.
  EXPECT_EQ(c.transfer_time(0, 1, 50'000'000), Time::ms(1) + Time::us(2));
  EXPECT_EQ(c.route(0, 1).hops.size(), 1u);
  // Across nodes: the inter-node latency end to end and the node's network bandwidth.
  // 3.125 MB at 3.125 GB/s = 1 ms, plus 10 us.
  EXPECT_EQ(c.transfer_time(0, 5, 3'125'000), Time::ms(1) + Time::us(10));
  EXPECT_EQ(c.route(5, 0).latency, Time::us(10));
  EXPECT_DOUBLE_EQ(c.route(1, 6).bottleneck_bytes_per_s, 3.125e9);
  EXPECT_EQ(c.transfer_time(3, 3, 1000), Time::zero());
}

TEST(Cluster, SwitchStarCarriesLatencyOnce) {
  // NVSwitch and PCIe shorthands are stars: two hops through a switch whose traversal is
  // the configured latency; the bandwidth is each GPU's port.
  const Cluster c =
      ClusterBuilder::shorthand(1, 8, v100(), link(LinkKind::kNvSwitch, 300e9, Time::us(3)),
                                link(LinkKind::kEthernet, 1e9, Time::us(10)));
  EXPECT_EQ(c.route(0, 7).hops.size(), 2u);
  EXPECT_EQ(c.route(0, 7).latency, Time::us(3));
  EXPECT_EQ(c.transfer_time(0, 7, 300'000'000), Time::ms(1) + Time::us(3));
}

TEST(Cluster, ExplicitGraphRoutesThroughSwitches) {
  // g0 - sw0 - g1 and g2 - sw1 - sw0 (a two-level PCIe tree). g0 -> g2 crosses
  // g0-sw0 (1 us, 16 GB/s), sw0-sw1 (2 us, 8 GB/s), sw1-g2 (1 us, 16 GB/s) and the
  // switches' own latency (0.5 us each): 4 us + 1 us; bottleneck 8 GB/s.
  ClusterBuilder b;
  const int g0 = b.add_gpu("g0", v100());
  const int g1 = b.add_gpu("g1", v100());
  const int g2 = b.add_gpu("g2", v100());
  const int sw0 = b.add_switch("sw0", Time::ns(500));
  const int sw1 = b.add_switch("sw1", Time::ns(500));
  b.add_link(b.gpu_vertex(g0), sw0, link(LinkKind::kPcie, 16e9, Time::us(1)));
  b.add_link(b.gpu_vertex(g1), sw0, link(LinkKind::kPcie, 16e9, Time::us(1)));
  b.add_link(sw0, sw1, link(LinkKind::kPcie, 8e9, Time::us(2)));
  b.add_link(sw1, b.gpu_vertex(g2), link(LinkKind::kPcie, 16e9, Time::us(1)));
  const Cluster c = b.build();
  const Route& r = c.route(g0, g2);
  EXPECT_EQ(r.hops.size(), 3u);
  EXPECT_EQ(r.latency, Time::us(5));
  EXPECT_DOUBLE_EQ(r.bottleneck_bytes_per_s, 8e9);
  EXPECT_EQ(c.transfer_time(g0, g2, 8'000'000), Time::ms(1) + Time::us(5));
  EXPECT_EQ(c.direction_name(r.hops[0]), "g0->sw0");
  EXPECT_EQ(c.direction_name(r.hops[2]), "sw1->g2");
  // g0 -> g1: one switch, 2 us of links + 0.5 us of switch.
  EXPECT_EQ(c.route(g0, g1).latency, Time::ns(2500));
}

TEST(Cluster, RejectsDisconnectedAndDuplicateNames) {
  ClusterBuilder b;
  b.add_gpu("a", v100());
  b.add_gpu("b", v100());
  EXPECT_THROW(b.build(), InputError);
  ClusterBuilder d;
  d.add_gpu("a", v100());
  d.add_switch("a");
  EXPECT_THROW(d.build(), InputError);
}

TEST(Placement, PoliciesOnTwoNodes) {
  const Cluster c =
      ClusterBuilder::shorthand(2, 4, v100(), link(LinkKind::kNvLink, 50e9, Time::us(2)),
                                link(LinkKind::kEthernet, 3.125e9, Time::us(10)));
  using P = std::vector<std::vector<std::vector<int>>>;
  // Three stages with 2, 1, 2 replicas (5 of the 8 GPUs: node0 = 0-3, node1 = 4-7).
  // append-first fills node0 before opening node1.
  EXPECT_EQ(place(c, {2, 1, 2}, 1, PlacementPolicy::kAppendFirst), (P{{{0, 1}, {2}, {3, 4}}}));
  // fresh-first takes the emptiest server for each stage and keeps a stage's replicas
  // together: stage 0 on node0 (a tie, first server), stage 1 on node1 (4 free against 2),
  // stage 2 on node1 again (3 free against 2).
  EXPECT_EQ(place(c, {2, 1, 2}, 1, PlacementPolicy::kFreshFirst), (P{{{0, 1}, {4}, {5, 6}}}));
  // scatter-first goes round-robin over servers, one GPU at a time.
  EXPECT_EQ(place(c, {2, 1, 2}, 1, PlacementPolicy::kScatterFirst), (P{{{0, 4}, {1}, {5, 2}}}));
  EXPECT_THROW(place(c, {4, 4}, 2, PlacementPolicy::kAppendFirst), InputError);
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

using Opts = ClusterBuilder::ShorthandOptions;

TEST(Topologies, Dgx1HybridCubeMesh) {
  // nvidia-smi topo of a DGX-1V: GPU0-GPU3 and GPU0-GPU4 are double NVLink bricks (2 x
  // 25 GB/s), GPU0-GPU1 a single one; GPU0 and GPU5 have no NVLink and meet over PCIe.
  Opts o;
  o.intra = ClusterBuilder::IntraTopology::kHybridCubeMesh;
  const Cluster c = ClusterBuilder::shorthand(1, 8, *find_gpu_preset("v100-16gb"),
                                              {"nvlink2", LinkKind::kNvLink, 25e9, Time::us(2)},
                                              *find_link_preset("eth25"), o);
  EXPECT_EQ(c.route(0, 3).hops.size(), 1u);
  EXPECT_DOUBLE_EQ(c.route(0, 3).bottleneck_bytes_per_s, 50e9);
  EXPECT_DOUBLE_EQ(c.route(0, 4).bottleneck_bytes_per_s, 50e9);
  EXPECT_DOUBLE_EQ(c.route(0, 1).bottleneck_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(c.route(0, 5).bottleneck_bytes_per_s, 15.75e9);  // PCIe 3 x16
  EXPECT_EQ(c.route(0, 5).latency, Time::us(3));
  // Every GPU has 6 bricks: 150 GB/s of NVLink per direction.
  for (int g = 0; g < 8; ++g) {
    double total = 0;
    for (int h = 0; h < 8; ++h) {
      if (h != g && c.route(g, h).hops.size() == 1) total += c.route(g, h).bottleneck_bytes_per_s;
    }
    EXPECT_DOUBLE_EQ(total, 150e9) << g;
  }
  EXPECT_THROW(
      ClusterBuilder::shorthand(1, 4, *find_gpu_preset("v100-16gb"), *find_link_preset("nvlink2"),
                                *find_link_preset("eth25"), o),
      InputError);
}

TEST(Topologies, PcieTreeSharesTheHostBridgeAndNic) {
  // 2 nodes x 4 GPUs, two GPUs per PCIe switch, 16 GB/s links, 1 us per traversal; the NIC
  // sits on the host bridge. GPU0 -> GPU1: one switch (1 us); GPU0 -> GPU2: switch, bridge,
  // switch (3 us); GPU0 -> node1/GPU0: plx, host, fabric (10 us), host, plx = 14 us, and
  // its bottleneck is the 12.5 GB/s NIC.
  Opts o;
  o.intra = ClusterBuilder::IntraTopology::kTree;
  const Cluster c = ClusterBuilder::shorthand(
      2, 4, *find_gpu_preset("a100-40gb"), {"custom", LinkKind::kPcie, 16e9, Time::us(1)},
      {"custom", LinkKind::kEthernet, 12.5e9, Time::us(10)}, o);
  EXPECT_EQ(c.route(0, 1).latency, Time::us(1));
  EXPECT_EQ(c.route(0, 2).latency, Time::us(3));
  EXPECT_EQ(c.route(0, 4).latency, Time::us(14));
  EXPECT_DOUBLE_EQ(c.route(0, 4).bottleneck_bytes_per_s, 12.5e9);
  // GPU0 and GPU1 reach the NIC through the same switch-to-bridge link.
  const auto& a = c.route(0, 4).hops;
  const auto& b = c.route(1, 5).hops;
  EXPECT_EQ(a[1], b[1]);
}

TEST(Topologies, LeafSpineOversubscription) {
  // 8 nodes, 4 per leaf, 10 GB/s per node, 2:1 oversubscribed: each leaf's uplink carries
  // 4 x 10 / 2 = 20 GB/s. Within a leaf: NIC, leaf, NIC; across: leaf, spine, leaf.
  Opts o;
  o.nodes_per_leaf = 4;
  o.oversubscription = 2.0;
  o.spine_latency = Time::us(1);
  const Cluster c =
      ClusterBuilder::shorthand(8, 1, *find_gpu_preset("a100-40gb"), *find_link_preset("nvlink3"),
                                {"custom", LinkKind::kInfiniBand, 10e9, Time::us(2)}, o);
  EXPECT_EQ(c.route(0, 1).latency, Time::us(2));
  EXPECT_EQ(c.route(0, 4).latency, Time::us(2 + 1 + 2));
  bool found = false;
  for (LinkDirection d : c.route(0, 4).hops) {
    if (c.direction_name(d) == "leaf0->spine") {
      found = true;
      EXPECT_DOUBLE_EQ(c.direction_bandwidth(d), 20e9);
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace pipesim
