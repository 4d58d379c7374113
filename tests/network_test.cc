// The flow-level network and collectives: max-min sharing worked by hand, contention
// against disjoint paths, all-reduce closed forms, and conservation of bytes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "core/units.h"
#include "scenario/setup.h"
#include "schedules/collective_estimates.h"
#include "schedules/collectives.h"
#include "sim/engine.h"
#include "tests/support.h"

namespace pipesim {
namespace {

LinkSpec link(double bw, Time lat, LinkKind k = LinkKind::kPcie) {
  return {"custom", k, bw, lat};
}
const GpuSpec& gpu() {
  return *find_gpu_preset("a100-80gb");
}

// Transfers that all start at time 0 (no deps), returning their op ids.
struct Flows {
  explicit Flows(int devices) : b(devices) {}
  OpId add(int src, int dst, int64_t bytes) {
    return b.add(transfer_op(src, dst, bytes, CommKind::kActivation, -1, -1, 0));
  }
  TaskGraphBuilder b;
};

TEST(MaxMin, TwoFlowsOnOneLinkEachGetHalf) {
  // 10 MB each over one 10 GB/s link: alone 1 ms; together 5 GB/s each: both end at 2 ms
  // (plus the 1 us latency, paid once).
  ClusterBuilder cb;
  const int a = cb.add_gpu("a", gpu()), b = cb.add_gpu("b", gpu());
  cb.add_link(cb.gpu_vertex(a), cb.gpu_vertex(b), link(10e9, Time::us(1)));
  const Cluster c = cb.build();
  Flows f(2);
  const OpId x = f.add(0, 1, 10'000'000), y = f.add(0, 1, 10'000'000);
  const TaskGraph g = std::move(f.b).build();
  const Timeline tl = simulate(g, c);
  EXPECT_EQ(tl.end[x], Time::ms(2) + Time::us(1));
  EXPECT_EQ(tl.end[y], Time::ms(2) + Time::us(1));
  EXPECT_EQ(tl.links[0].peak_flows, 2);
  EXPECT_EQ(tl.links[1].peak_flows, 0);  // the other direction stays idle
}

TEST(MaxMin, ThreeFlowsTwoLinksByHand) {
  // Star through switch s; bandwidths a-s 10 GB/s, s-b 4 GB/s, others 100 GB/s.
  //   f1: a -> c crosses a->s        (L1, 10)
  //   f2: a -> b crosses a->s, s->b  (L1 and L2)
  //   f3: d -> b crosses s->b        (L2, 4)
  // Progressive filling: L2 offers 4/2 = 2 each, L1 10/2 = 5: L2 is the bottleneck, so
  // f2 = f3 = 2 GB/s; L1 has 10 - 2 = 8 left for f1. With 8, 4 and 2 MB: f1 and f3 end at
  // 1 ms (8 MB at 8, 2 MB at 2). f2 has 2 MB left and alone gets min(10, 4) = 4 GB/s:
  // it ends 0.5 ms later, at 1.5 ms.
  ClusterBuilder cb;
  const int a = cb.add_gpu("a", gpu()), b = cb.add_gpu("b", gpu()), cc = cb.add_gpu("c", gpu()),
            d = cb.add_gpu("d", gpu());
  const int s = cb.add_switch("s");
  cb.add_link(cb.gpu_vertex(a), s, link(10e9, Time::zero()));
  cb.add_link(s, cb.gpu_vertex(b), link(4e9, Time::zero()));
  cb.add_link(s, cb.gpu_vertex(cc), link(100e9, Time::zero()));
  cb.add_link(cb.gpu_vertex(d), s, link(100e9, Time::zero()));
  const Cluster c = cb.build();
  Flows f(4);
  const OpId f1 = f.add(a, cc, 8'000'000), f2 = f.add(a, b, 4'000'000), f3 = f.add(d, b, 2'000'000);
  const TaskGraph g = std::move(f.b).build();
  const Timeline tl = simulate(g, c);
  EXPECT_EQ(tl.end[f1], Time::ms(1));
  EXPECT_EQ(tl.end[f3], Time::ms(1));
  EXPECT_EQ(tl.end[f2], Time::us(1500));
}

TEST(MaxMin, FlowLimitedByItsBottleneckHop) {
  // a -(10 GB/s)- s -(2 GB/s)- b: 2 MB takes 1 ms, whatever the first hop offers.
  ClusterBuilder cb;
  const int a = cb.add_gpu("a", gpu()), b = cb.add_gpu("b", gpu());
  const int s = cb.add_switch("s");
  cb.add_link(cb.gpu_vertex(a), s, link(10e9, Time::zero()));
  cb.add_link(s, cb.gpu_vertex(b), link(2e9, Time::zero()));
  const Cluster c = cb.build();
  Flows f(2);
  const OpId x = f.add(a, b, 2'000'000);
  const TaskGraph g = std::move(f.b).build();
  EXPECT_EQ(simulate(g, c).end[x], Time::ms(1));
}

Cluster two_nodes(int per_node, double intra_bw, Time intra_lat, double inter_bw, Time inter_lat) {
  return ClusterBuilder::shorthand(2, per_node, gpu(), link(intra_bw, intra_lat, LinkKind::kNvLink),
                                   link(inter_bw, inter_lat, LinkKind::kEthernet));
}

TEST(Contention, SharedNicSlowsBothDisjointPathsDoNot) {
  // 2 nodes x 2 GPUs, 10 GB/s per node uplink, 10 us. node0/gpu0 -> node1/gpu0 (pipeline
  // activations) and node0/gpu1 -> node1/gpu1 (an all-reduce step) both leave through
  // node0's uplink: 5 GB/s each, so 10 MB takes 10 us + 2 ms instead of 10 us + 1 ms.
  // node1/gpu1 -> node0/gpu1 instead goes the other way on every link: no slowdown.
  const Cluster c = two_nodes(2, 100e9, Time::us(1), 10e9, Time::us(10));
  {
    Flows f(4);
    const OpId act = f.add(0, 2, 10'000'000), ar = f.add(1, 3, 10'000'000);
    const TaskGraph g = std::move(f.b).build();
    const Timeline tl = simulate(g, c);
    EXPECT_EQ(tl.end[act], Time::us(10) + Time::ms(2));
    EXPECT_EQ(tl.end[ar], Time::us(10) + Time::ms(2));
  }
  {
    Flows f(4);
    const OpId act = f.add(0, 2, 10'000'000), ar = f.add(3, 1, 10'000'000);
    const TaskGraph g = std::move(f.b).build();
    const Timeline tl = simulate(g, c);
    EXPECT_EQ(tl.end[act], Time::us(10) + Time::ms(1));
    EXPECT_EQ(tl.end[ar], Time::us(10) + Time::ms(1));
  }
}

// An all-reduce of `bytes` among `devices`, alone on the cluster: its makespan.
Time allreduce_time(const Cluster& c, const std::vector<int>& devices, int64_t bytes,
                    AllReduceAlgo algo, int64_t* link_bytes = nullptr, int64_t* sent = nullptr) {
  TaskGraphBuilder b(c.num_devices());
  std::vector<CollectiveMember> members;
  for (int d : devices) members.push_back({d, c.device(d).node, {}, UINT32_MAX});
  add_allreduce(b, algo, members, bytes, {0, 0});
  const TaskGraph g = std::move(b).build();
  EXPECT_FALSE(g.validate().has_value());
  const Timeline tl = simulate(g, c);
  if (link_bytes != nullptr) {
    *link_bytes = 0;
    for (const LinkStats& l : tl.links) *link_bytes += l.bytes;
  }
  if (sent != nullptr) {
    *sent = 0;
    for (const Op& op : g.ops())
      *sent += op.bytes * static_cast<int64_t>(c.route(op.device, op.peer).hops.size());
  }
  return tl.makespan;
}

TEST(AllReduce, RingClosedForm) {
  // 2(n - 1) alpha + 2(n - 1)/n S/B on an NVLink mesh (every ring hop its own link).
  for (int n : {2, 3, 4, 8}) {
    const Cluster c =
        ClusterBuilder::shorthand(1, n, gpu(), link(10e9, Time::us(5), LinkKind::kNvLink),
                                  link(1e9, Time::us(10), LinkKind::kEthernet));
    std::vector<int> devs(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) devs[static_cast<size_t>(i)] = i;
    const int64_t S = 24'000'000;  // divisible by every n here
    const Time expect =
        Time::us(5) * (2 * (n - 1)) + serialization_time(S / n, 10e9) * (2 * (n - 1));
    int64_t carried = 0, sent = 0;
    EXPECT_EQ(allreduce_time(c, devs, S, AllReduceAlgo::kRing, &carried, &sent), expect) << n;
    EXPECT_EQ(carried, sent);  // bytes sent = bytes received on every link
    EXPECT_EQ(sent, int64_t{n} * 2 * (n - 1) * (S / n));
  }
}

TEST(AllReduce, HierarchicalClosedForm) {
  // N = 2 nodes x g = 4 GPUs; intra 100 GB/s, 2 us; inter 10 GB/s per node, 20 us.
  // Reduce-scatter: (g-1)(2 us + S/(g 100 GB/s)); across nodes, the g rings share each
  // node's uplink (10/g GB/s each): 2(N-1)(20 us + (S/(gN)) / (10/g GB/s)); all-gather as
  // reduce-scatter. S = 80 MB: RS = 3 (2 us + 0.2 ms), AR = 2 (20 us + 4 ms).
  const Cluster c = two_nodes(4, 100e9, Time::us(2), 10e9, Time::us(20));
  std::vector<int> devs{0, 1, 2, 3, 4, 5, 6, 7};
  const Time rs = (Time::us(2) + Time::us(200)) * 3;
  const Time ar = (Time::us(20) + Time::ms(4)) * 2;
  int64_t carried = 0, sent = 0;
  EXPECT_EQ(allreduce_time(c, devs, 80'000'000, AllReduceAlgo::kHierarchical, &carried, &sent),
            rs + ar + rs);
  EXPECT_EQ(carried, sent);
  // The estimate auto uses agrees with the simulation on idle links.
  EXPECT_EQ(allreduce_estimate(c, devs, 80'000'000, AllReduceAlgo::kHierarchical), rs + ar + rs);
}

TEST(AllReduce, OneAlphaBetaFormulaPerAlgorithm) {
  // The formula the lowering's estimate and the planner share, with a step of alpha = 1 s
  // plus 1 s per byte on every edge but the across-server ring's (2 s per byte). A group of
  // 2 servers x 4 members, 800 bytes:
  //   ring          2(8 - 1) steps of 800 / 8 = 100 bytes:              14 x 101 = 1414
  //   tree          depth 3 (member 7 -> 3 -> 1 -> 0), one chunk (800 < 4 MiB):
  //                 2(3 + 1 - 1) = 6 steps of 800 bytes: 6 x 801 = 4806
  //   hierarchical  two passes of 3 steps of 200 bytes in a server, 2 x 3 x 201 = 1206, and
  //                 2(2 - 1) = 2 steps of 800 / 8 = 100 bytes across, the 4 rings through
  //                 one port (x 4): 2 x (1 + 2 x 400) = 1602; through 2 ports (x 2): 802
  const GroupShape g = group_shape({0, 1, 2, 3, 4, 5, 6, 7}, [](int d) { return d / 4; });
  ASSERT_TRUE(g.hierarchical);
  EXPECT_EQ(g.intra, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g.across, (std::vector<int>{0, 4}));
  const auto step = [](StepEdges e, int64_t chunk) {
    return 1.0 + (e == StepEdges::kAcross ? 2.0 : 1.0) * static_cast<double>(chunk);
  };
  EXPECT_EQ(alpha_beta_allreduce(AllReduceAlgo::kRing, g, 800, 1, step), 1414.0);
  EXPECT_EQ(alpha_beta_allreduce(AllReduceAlgo::kTree, g, 800, 1, step), 4806.0);
  EXPECT_EQ(alpha_beta_allreduce(AllReduceAlgo::kHierarchical, g, 800, 1, step), 1206.0 + 1602.0);
  EXPECT_EQ(alpha_beta_allreduce(AllReduceAlgo::kHierarchical, g, 800, 2, step), 1206.0 + 802.0);
  // Uneven servers (3 + 1): no hierarchical form, the ring instead.
  const GroupShape uneven = group_shape({0, 1, 2, 4}, [](int d) { return d / 4; });
  EXPECT_FALSE(uneven.hierarchical);
  EXPECT_EQ(alpha_beta_allreduce(AllReduceAlgo::kHierarchical, uneven, 800, 1, step),
            alpha_beta_allreduce(AllReduceAlgo::kRing, uneven, 800, 1, step));
}

// A chain of n GPUs given as a graph, 1 us a link, link i (GPU i to i + 1) of bw(i) bytes/s.
Cluster gpu_chain(int n, const std::function<double(int)>& bw) {
  ClusterBuilder b;
  for (int i = 0; i < n; ++i) b.add_gpu(fmt::format("g{}", i), gpu());
  for (int i = 0; i + 1 < n; ++i)
    b.add_link(b.gpu_vertex(i), b.gpu_vertex(i + 1), link(bw(i), Time::us(1), LinkKind::kNvLink));
  return b.build();
}

TEST(AllReduce, ARingsStepIsItsEdgesMeanOrItsSlowestSerialization) {
  // A chain of 4 GPUs (100 GB/s, 1 us a link), the ring 0 -> 1 -> 2 -> 3 -> 0: three edges
  // of one link and the wrap-around back over all three. 4 MB: 2(4 - 1) = 6 steps of 1 MB,
  // 10 us on the wire; the edges take 11, 11, 11 and 13 us. A member's next step waits for
  // its predecessor's chunk, so the chain of waits goes round the ring: a step is the mean,
  // 11.5 us (more than the 10 us any link is busy): 6 x 11.5 = 69 us, where the slowest
  // edge every step would say 6 x 13 = 78. The simulated ring, worked step by step (each
  // arrival the predecessor's plus its edge): 13, 24, 35, 46, 59, 70 us at member 0.
  const Cluster c = gpu_chain(4, [](int) { return 100e9; });
  const std::vector<int> ring{0, 1, 2, 3};
  EXPECT_EQ(allreduce_estimate(c, ring, 4'000'000, AllReduceAlgo::kRing), Time::us(69));
  EXPECT_EQ(allreduce_time(c, ring, 4'000'000, AllReduceAlgo::kRing), Time::us(70));
  // One slow link (1 GB/s between GPUs 1 and 2): 1 MB takes 1 ms on it, which the edges'
  // mean (11, 1001, 11 and 1003 us: 506.5 us) is less than; the busy link paces the ring:
  // 6 x 1 ms. The simulated ring takes at least the 6 MB the wrap-around carries back over
  // that link plus its 3 us of latency, and at most the slowest edge every step (6 x 1003).
  const Cluster s = gpu_chain(4, [](int i) { return i == 1 ? 1e9 : 100e9; });
  EXPECT_EQ(allreduce_estimate(s, ring, 4'000'000, AllReduceAlgo::kRing), Time::us(6000));
  const Time simulated = allreduce_time(s, ring, 4'000'000, AllReduceAlgo::kRing);
  EXPECT_GE(simulated, Time::us(6003));
  EXPECT_LE(simulated, Time::us(6018));
}

TEST(AllReduce, AutoTakesTheRingOnAChain) {
  // A chain of 64 GPUs (100 GB/s, 1 us a link), the group every other GPU (0, 2, ..., 62:
  // stage 0 of two-stage copies). 8 MB: the ring's 62 steps of 250 KB (2.5 us on the
  // wire) cross 2 links, the wrap-around 62: a step is the mean, (31 x 4.5 + 64.5) / 32 =
  // 6.375 us, so 395.25 us in all; counting the wrap-around's 64.5 us every step (the
  // slowest edge) made it 4 ms, and the tree (its heap edges up to 32 links long) won.
  const Cluster c = gpu_chain(64, [](int) { return 100e9; });
  std::vector<int> group;
  for (int i = 0; i < 64; i += 2) group.push_back(i);
  EXPECT_EQ(allreduce_estimate(c, group, 8'000'000, AllReduceAlgo::kRing), Time::ns(395250));
  EXPECT_EQ(fastest_allreduce(link_costs(c), group, 8'000'000), AllReduceAlgo::kRing);
  EXPECT_LT(allreduce_time(c, group, 8'000'000, AllReduceAlgo::kRing),
            allreduce_time(c, group, 8'000'000, AllReduceAlgo::kTree));
}

TEST(AllReduce, TreeBeatsRingWhenLatencyDominates) {
  // 16 GPUs on an NVSwitch (one 10 GB/s port each, 10 us through the switch), 1 KB: the
  // ring pays 2(n - 1) = 30 latencies; the double binary tree 2(depth + chunks - 1) =
  // 2 (4 + 1 - 1) = 8 (one chunk for so little data). With 160 MB the ring's bandwidth-optimal 2(n
  // - 1)/n S/B wins, because a tree's interior member pushes every chunk through its one port to
  // two children.
  const Cluster c =
      ClusterBuilder::shorthand(1, 16, gpu(), link(10e9, Time::us(10), LinkKind::kNvSwitch),
                                link(1e9, Time::us(10), LinkKind::kEthernet));
  std::vector<int> devs(16);
  for (int i = 0; i < 16; ++i) devs[static_cast<size_t>(i)] = i;
  const Time tree_small = allreduce_time(c, devs, 1000, AllReduceAlgo::kTree);
  const Time ring_small = allreduce_time(c, devs, 1000, AllReduceAlgo::kRing);
  EXPECT_LT(tree_small, ring_small);
  EXPECT_GE(ring_small, Time::us(10) * 30);
  const Time tree_big = allreduce_time(c, devs, 160'000'000, AllReduceAlgo::kTree);
  const Time ring_big = allreduce_time(c, devs, 160'000'000, AllReduceAlgo::kRing);
  EXPECT_LT(ring_big, tree_big);
  int64_t carried = 0, sent = 0;
  allreduce_time(c, devs, 1'000'000, AllReduceAlgo::kTree, &carried, &sent);
  EXPECT_EQ(carried, sent);
  // Each tree moves half the data, in K chunks, up and down every edge: 2 trees x 2 x
  // (n - 1) edges x S / 2, each crossing two hops (GPU -> switch -> GPU).
  EXPECT_EQ(sent, 2 * 2 * 15 * (1'000'000 / 2) * 2);
}

TEST(AllReduce, AutoPicksTheCheapestPerGroup) {
  // A data-parallel scenario where 16 copies of a tiny model sync 1 KB: auto must not be
  // slower than any fixed choice.
  test::PipeSpec p;
  p.stages = 1;
  p.micro_batches = 1;
  p.data = 16;
  p.params = "250";  // 1000 bytes of fp32 gradients
  p.latency = "10 us";
  p.bandwidth = "10 GB/s";
  Time best = Time::max();
  for (const char* algo : {"ring", "tree", "hierarchical"}) {
    p.strategy_extra = fmt::format("  allreduce: {}\n", algo);
    best = min(best, test::run_pipe(p).timeline.makespan);
  }
  p.strategy_extra = "  allreduce: auto\n";
  EXPECT_EQ(test::run_pipe(p).timeline.makespan, best);
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

TEST(Buckets, GradientSyncOverlapsTheRestOfTheBackward) {
  // One stage of 4 layers (t_f = t_b = 1 ms each, 1 M fp32 params = 4 MB of gradients),
  // two data-parallel copies on GPUs joined at 8 GB/s with no latency; M = 1.
  // bucket 8 MB: the backward runs layers 3, 2 (bucket 0) then 1, 0 (bucket 1).
  //   F [0,4]; B part 0 [4,6]; its all-reduce: 2 ring steps of 4 MB at 8 GB/s = [6,7];
  //   B part 1 [6,8]; its all-reduce [8,9]; optimizer at 9 ms.
  // One bucket (bucket: 1 GB): B [4,8], then 2 steps of 8 MB = 2 ms: optimizer at 10 ms.
  const std::string yaml = R"(cluster:
  gpu: a100-80gb
  nodes: 1
  gpus_per_node: 2
  intra_node: {kind: nvlink, bandwidth: 8 GB/s, latency: 0 us}
model:
  layers: [{name: l, repeat: 4, forward: 1 ms, backward: 1 ms, params: 1M}]
training: {global_batch: 2, micro_batch: 1}
strategy: {schedule: dapple, pipeline: 1, data: 2, allreduce: ring, bucket: 8 MB}
)";
  const test::SimRun r = test::run_yaml(yaml);
  EXPECT_EQ(r.timeline.makespan, Time::ms(9));
  std::vector<std::pair<Time, Time>> parts;
  for (OpId id : r.graph.stream(0)) {
    if (r.graph.op(id).kind == OpKind::kBackward)
      parts.emplace_back(r.timeline.start[id], r.timeline.end[id]);
  }
  EXPECT_EQ(parts, (std::vector<std::pair<Time, Time>>{{Time::ms(4), Time::ms(6)},
                                                       {Time::ms(6), Time::ms(8)}}));
  std::string one = yaml;
  one.replace(one.find("bucket: 8 MB"), 12, "bucket: 1 GB");
  EXPECT_EQ(test::run_yaml(one).timeline.makespan, Time::ms(10));
  // `pipesim order` still shows one backward.
  const auto o = test::cli({"order", test::write_temp("buckets.yaml", yaml)});
  EXPECT_EQ(o.out, "dev0: F0 B0\ndev1: F0 B0\n");
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

TEST(Contention, OversubscribedSpine) {
  // 8 single-GPU nodes, 4 per leaf, 10 GB/s each, 2:1: a leaf's uplink carries 20 GB/s.
  // Four flows from leaf 0's nodes to leaf 1's share it: 5 GB/s each, so 10 MB takes
  // 2 ms (+ 2 + 1 + 2 us of latency); one flow alone is held to its node's 10 GB/s: 1 ms.
  ClusterBuilder::ShorthandOptions o;
  o.nodes_per_leaf = 4;
  o.oversubscription = 2.0;
  o.spine_latency = Time::us(1);
  const Cluster c =
      ClusterBuilder::shorthand(8, 1, gpu(), *find_link_preset("nvlink3"),
                                {"custom", LinkKind::kInfiniBand, 10e9, Time::us(2)}, o);
  Flows four(8);
  std::vector<OpId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(four.add(i, 4 + i, 10'000'000));
  const TaskGraph g = std::move(four.b).build();
  const Timeline tl = simulate(g, c);
  for (OpId id : ids) EXPECT_EQ(tl.end[id], Time::us(5) + Time::ms(2));
  Flows one(8);
  const OpId x = one.add(0, 4, 10'000'000);
  const TaskGraph g1 = std::move(one.b).build();
  EXPECT_EQ(simulate(g1, c).end[x], Time::us(5) + Time::ms(1));
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

TEST(Network, EachGpuHasItsOwnPortWithRailNics) {
  // Eight 2-stage pipelines, stage 0 on node0/gpu i and stage 1 on node1/gpu i, each
  // sending 800 MB (one micro-batch's output) and the gradient back over 400 Gbit/s
  // (50 GB/s) ports, no latency; F and B 1 ms per stage.
  // - nics: 8: each pipeline has its own port, 16 ms each way: 1 + 16 + 1 + 1 + 16 + 1 = 36.
  // - nics: 4: two pipelines per port, 32 ms each way: 68.
  // - nics: 1 (one port per node, the default): eight share it, 128 ms each way: 260.
  std::string placement;
  for (int i = 0; i < 8; ++i)
    placement += fmt::format("{}[node0/gpu{}], [node1/gpu{}]", i ? ", " : "", i, i);
  const auto yaml = [&](int nics) {
    return fmt::format(R"(
cluster: {{gpu: h100-80gb, nodes: 2, gpus_per_node: 8, intra_node: nvswitch,
          inter_node: {{kind: infiniband, bandwidth: 400 Gbit/s, latency: 0 us, nics: {}}}}}
model:
  layers:
    - {{name: l, repeat: 2, forward: 1 ms, backward: 1 ms, activation: 1 MiB, output: 800 MB}}
training: {{global_batch: 8, micro_batch: 1}}
strategy: {{schedule: gpipe, pipeline: 2, data: 8, placement: [{}]}}
)",
                       nics, placement);
  };
  EXPECT_EQ(test::run_yaml(yaml(8)).timeline.makespan, Time::ms(36));
  EXPECT_EQ(test::run_yaml(yaml(4)).timeline.makespan, Time::ms(68));
  EXPECT_EQ(test::run_yaml(yaml(1)).timeline.makespan, Time::ms(260));
  // More ports than GPUs is bad input, naming the key.
  const auto r = test::cli({"run", test::write_temp("nics.yaml", yaml(9))});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cluster.inter_node.nics"), std::string::npos) << r.err;
}

// A link preset is one port; given to nodes of several GPUs without `nics`, it is a
// default a DGX user does not mean (8 times too slow for a DGX H100): run says so, on
// stderr and in the report's warnings. `nics` (even 1) or a bandwidth of one's own is
// meant, and stays quiet; so does one node, or nodes of 2 GPUs.
TEST(Network, APresetPortForANodeOfGpusWarns) {
  const auto warnings = [](const std::string& gpus, const std::string& inter, int nodes = 2) {
    const std::string yaml = "cluster: {gpu: h100-80gb, nodes: " + std::to_string(nodes) +
                             ", gpus_per_node: " + gpus +
                             ", intra_node: nvswitch, inter_node: " + inter +
                             "}\nmodel: {layers: [{name: l, forward: 1 ms, backward: 1 ms}]}\n"
                             "training: {global_batch: 16, micro_batch: 1}\n"
                             "strategy: {schedule: dapple, pipeline: 1, data: " +
                             std::to_string(nodes * std::stoi(gpus)) + "}\n";
    const test::CliResult r =
        test::cli({"run", test::write_temp("ports.yaml", yaml), "--json", "-"});
    EXPECT_EQ(r.code, 0) << r.err;
    const nlohmann::json report = nlohmann::json::parse(r.out);
    std::string all;
    for (const auto& w : report["warnings"]) all += w.get<std::string>() + "\n";
    // (Each report warning is on stderr too.)
    if (all.find("cluster.inter_node") != std::string::npos) {
      EXPECT_NE(r.err.find("pipesim: warning: cluster.inter_node"), std::string::npos);
    }
    return all;
  };
  const std::string said = warnings("8", "ib-ndr");
  EXPECT_NE(said.find("'ib-ndr' is one network port for each node of 8 GPUs"), std::string::npos)
      << said;
  EXPECT_NE(said.find("write nics: 8"), std::string::npos) << said;
  EXPECT_NE(warnings("8", "{preset: eth400}").find("cluster.inter_node"), std::string::npos);
  // A kind alone is its default preset, one port too.
  EXPECT_NE(warnings("8", "{kind: infiniband, latency: 2 us}").find("'infiniband'"),
            std::string::npos);
  EXPECT_EQ(warnings("8", "{preset: ib-ndr, nics: 8}").find("cluster.inter_node"),
            std::string::npos);
  EXPECT_EQ(warnings("8", "{preset: ib-ndr, nics: 1}").find("cluster.inter_node"),
            std::string::npos);
  EXPECT_EQ(warnings("8", "{kind: infiniband, bandwidth: 200 GB/s}").find("cluster.inter_node"),
            std::string::npos);
  EXPECT_EQ(warnings("2", "ib-ndr").find("cluster.inter_node"), std::string::npos);
  EXPECT_EQ(warnings("8", "ib-ndr", 1).find("cluster.inter_node"), std::string::npos);
}

}  // namespace
}  // namespace pipesim
