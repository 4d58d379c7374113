// Hierarchical reduce-scatter and all-gather (schedules/collectives_rs_ag.h): over N nodes of
// g members each, g - 1 ring steps of bytes / g inside each node and N - 1 steps of
// bytes / (gN) on one ring per local rank across the nodes (an all-gather in the other
// order); any other layout of members falls back to the plain ring.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/checked.h"
#include "core/units.h"
#include "schedules/collectives_rs_ag.h"
#include "sim/engine.h"
#include "tests/support.h"
#include "topology/presets.h"

namespace pipesim {
namespace {

// B_in = 100 GB/s (10 ps a byte) on an NVLink mesh inside a node, B_net = 10 GB/s (100 ps a
// byte) on each GPU's own network port (rail-optimized, nics = gpus per node); no latency.
constexpr double kIn = 100e9, kNet = 10e9;

Cluster rail_cluster(int nodes, int per_node) {
  ClusterBuilder::ShorthandOptions o;
  o.nics = per_node;
  return ClusterBuilder::shorthand(nodes, per_node, *find_gpu_preset("h100-80gb"),
                                   {"custom", LinkKind::kNvLink, kIn, Time::zero()},
                                   {"custom", LinkKind::kInfiniBand, kNet, Time::zero()}, o);
}

struct Half {
  Time makespan;
  int64_t sent = 0;        // sum of the transfers' sizes
  int64_t across = 0;      // ... of those between nodes
  int64_t sent_hops = 0;   // each transfer's size times the hops of its route
  int64_t link_bytes = 0;  // what the links carried (the simulation's count)
  size_t ops = 0;
};

// A reduce-scatter (or all-gather) of `bytes` among `devices`, alone on the cluster.
Half run_half(const Cluster& c, const std::vector<int>& devices, int64_t bytes, bool gather,
              AllReduceAlgo algo) {
  TaskGraphBuilder b(c.num_devices());
  std::vector<CollectiveMember> members;
  for (int d : devices) members.push_back({d, c.device(d).node, {}, UINT32_MAX});
  if (gather)
    add_all_gather(b, members, bytes, {0, 0}, algo);
  else
    add_reduce_scatter(b, members, bytes, {0, 0}, algo);
  const TaskGraph g = std::move(b).build();
  EXPECT_FALSE(g.validate().has_value());
  const Timeline tl = simulate(g, c);
  Half h;
  h.makespan = tl.makespan;
  h.ops = g.size();
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::kTransfer) continue;
    h.sent += op.bytes;
    if (c.device(op.device).node != c.device(op.peer).node) h.across += op.bytes;
    h.sent_hops += op.bytes * static_cast<int64_t>(c.route(op.device, op.peer).hops.size());
  }
  for (const LinkStats& l : tl.links) h.link_bytes += l.bytes;
  return h;
}

// 2 nodes x 2 GPUs (devices 0, 1 on node 0; 2, 3 on node 1), S = 40 MB.
//  Hierarchical, reduce-scatter: inside, rings {0,1} and {2,3}, g - 1 = 1 step of S/2 = 20 MB
//    at B_in (each direction of the NVLink its own): 200 us. Across, rings {0,2} and {1,3},
//    N - 1 = 1 step of S/4 = 10 MB, each GPU on its own port, both directions free: 1 ms.
//    (g-1)(S/g)/B_in + (N-1)(S/(gN))/B_net = 1.2 ms. The all-gather runs the halves in the
//    other order: 1 ms + 200 us, the same.
//  Plain ring 0 -> 1 -> 2 -> 3 -> 0: 3 steps of S/4 = 10 MB; hops 1->2 and 3->0 cross the
//    network (c = 1 ms a chunk), 0->1 and 2->3 do not (a = 100 us). Member 1's step-k send
//    waits only for its step-(k-1) receive, so its sends queue on its port: step 1 joins at
//    a and shares it (step 0 ends at 2c - a), step 2 comes in when 0 -> 1's step 1 ends
//    (after 3 -> 0's step 0, 2c - a, plus a = 2c) exactly as step 1 ends. The port is never
//    idle from 0 until its 3 chunks are through: 3 (S/4)/B_net = 3 ms; port 3's likewise.
//    The last intra-node steps start when their network receives end (2c) and end at 2c + a.
constexpr int64_t kS = 40'000'000;

TEST(HierarchicalRsAg, ReduceScatterTwoByTwoClosedForm) {
  const Cluster c = rail_cluster(2, 2);
  const std::vector<int> devs{0, 1, 2, 3};
  const Time hier = serialization_time(kS / 2, kIn) + serialization_time(kS / 4, kNet);
  const Time ring = serialization_time(kS / 4, kNet) * 3;
  EXPECT_EQ(hier, Time::us(1200));
  EXPECT_EQ(ring, Time::ms(3));
  const Half h = run_half(c, devs, kS, false, AllReduceAlgo::kHierarchical);
  const Half r = run_half(c, devs, kS, false, AllReduceAlgo::kRing);
  EXPECT_EQ(h.makespan, hier);
  EXPECT_NEAR(static_cast<double>(r.makespan.ps_count()), static_cast<double>(ring.ps_count()), 1);
  EXPECT_LT(h.makespan, r.makespan);
}

TEST(HierarchicalRsAg, AllGatherTwoByTwoClosedForm) {
  const Cluster c = rail_cluster(2, 2);
  const std::vector<int> devs{0, 1, 2, 3};
  const Half h = run_half(c, devs, kS, true, AllReduceAlgo::kHierarchical);
  const Half r = run_half(c, devs, kS, true, AllReduceAlgo::kRing);
  EXPECT_EQ(h.makespan, Time::ms(1) + Time::us(200));
  EXPECT_NEAR(static_cast<double>(r.makespan.ps_count()),
              static_cast<double>(Time::ms(3).ps_count()), 1);
  EXPECT_LT(h.makespan, r.makespan);
}

TEST(HierarchicalRsAg, BytesConservation) {
  // n = gN members. Hierarchical: inside, N nodes x g members x (g - 1) steps x ceil(S/g);
  // across, g rings x N members x (N - 1) steps x ceil(S/(gN)). With S divisible by gN:
  // N(g - 1)S + (N - 1)S = (gN - 1)S = (n - 1)S, what the plain ring sends
  // (n members x (n - 1) steps x S/n). Only the across half leaves a node: (N - 1)S, where
  // the ring's N node-crossing hops carry (n - 1)S/n each: N(n - 1)S/n.
  for (const auto& [N, g] : {std::pair{2, 2}, std::pair{2, 4}, std::pair{4, 2}, std::pair{3, 4}}) {
    SCOPED_TRACE(fmt::format("{} nodes x {} GPUs", N, g));
    const Cluster c = rail_cluster(N, g);
    const int n = N * g;
    std::vector<int> devs(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) devs[static_cast<size_t>(i)] = i;
    for (const bool gather : {false, true}) {
      for (const int64_t S : {int64_t{48'000'000}, int64_t{1'000'003}}) {
        const Half h = run_half(c, devs, S, gather, AllReduceAlgo::kHierarchical);
        const Half r = run_half(c, devs, S, gather, AllReduceAlgo::kRing);
        const int64_t inside = int64_t{N} * g * (g - 1) * ceil_div(S, int64_t{g});
        const int64_t across = int64_t{g} * N * (N - 1) * ceil_div(S, int64_t{g} * N);
        EXPECT_EQ(h.sent, inside + across);
        EXPECT_EQ(h.across, across);
        EXPECT_EQ(r.sent, int64_t{n} * (n - 1) * ceil_div(S, int64_t{n}));
        EXPECT_EQ(r.across, int64_t{N} * (n - 1) * ceil_div(S, int64_t{n}));
        if (S % n == 0) {
          EXPECT_EQ(h.sent, (n - 1) * S);
          EXPECT_EQ(h.sent, r.sent);
          EXPECT_EQ(h.across, (N - 1) * S);
        }
        EXPECT_LT(h.across, r.across);
        // What the links carried is what was sent, hop by hop.
        EXPECT_EQ(h.link_bytes, h.sent_hops);
        EXPECT_EQ(r.link_bytes, r.sent_hops);
      }
    }
  }
}

TEST(HierarchicalRsAg, UnevenNodesFallBackToTheRing) {
  // 3 members, 0 and 1 on node 0, 2 on node 1: by_node() finds unequal nodes, so the
  // hierarchical halves are the plain ring: 2 steps of S/3, the same graph and time.
  // One member per node (devices 0 and 2 of 2 x 2) is no hierarchy either.
  const Cluster c = rail_cluster(2, 2);
  for (const std::vector<int>& devs : {std::vector<int>{0, 1, 2}, std::vector<int>{0, 2}}) {
    for (const bool gather : {false, true}) {
      const Half h = run_half(c, devs, 30'000'000, gather, AllReduceAlgo::kHierarchical);
      const Half r = run_half(c, devs, 30'000'000, gather, AllReduceAlgo::kRing);
      EXPECT_EQ(h.makespan, r.makespan);
      EXPECT_EQ(h.ops, r.ops);
      EXPECT_EQ(h.sent, r.sent);
      const auto n = static_cast<int64_t>(devs.size());
      EXPECT_EQ(h.sent, n * (n - 1) * (30'000'000 / n));
    }
  }
}

TEST(HierarchicalRsAg, ZeroOneScenarioHierarchicalBeatsRing) {
  // 16 data-parallel copies on 2 nodes x 8 H100s (NVSwitch inside, one 400 Gbit/s port per
  // GPU), ZeRO-1: the gradients' reduce-scatter and the weights' all-gather follow
  // strategy.allreduce. Hierarchical moves only (N - 1)S = S across nodes per collective,
  // the ring N(n - 1)S/n = 15S/8, and its steps run at NVSwitch speed inside the nodes.
  const auto yaml = [](const char* algo) {
    return fmt::format(R"(
cluster: {{gpu: h100-80gb, nodes: 2, gpus_per_node: 8, intra_node: nvswitch,
          inter_node: {{kind: infiniband, bandwidth: 400 Gbit/s, nics: 8}}}}
model: {{generator: transformer, layers: 4, hidden: 512, heads: 8, sequence: 256, vocab: 8192}}
training: {{global_batch: 16, micro_batch: 1, precision: mixed, optimizer: adam}}
strategy: {{schedule: dapple, pipeline: 1, data: 16, zero: 1, allreduce: {}}}
)",
                       algo);
  };
  const test::SimRun hier = test::run_yaml(yaml("hierarchical"));
  const test::SimRun ring = test::run_yaml(yaml("ring"));
  const auto collective_bytes = [](const test::SimRun& r, CommKind kind, bool across) {
    int64_t sum = 0;
    for (const Op& op : r.graph.ops()) {
      if (op.kind == OpKind::kTransfer && op.comm == kind &&
          (!across || r.scenario.cluster.device(op.device).node !=
                          r.scenario.cluster.device(op.peer).node))
        sum += op.bytes;
    }
    return sum;
  };
  for (const CommKind kind : {CommKind::kReduceScatter, CommKind::kAllGather}) {
    SCOPED_TRACE(static_cast<int>(kind));
    const int64_t h_all = collective_bytes(hier, kind, false);
    const int64_t r_all = collective_bytes(ring, kind, false);
    ASSERT_GT(r_all, 0);
    // Same volume up to the rounding of the chunks (ceil(S/8) and ceil(S/16) against ceil(S/16)).
    EXPECT_NEAR(static_cast<double>(h_all), static_cast<double>(r_all), 16.0 * 16.0);
    // Less of it across nodes: about S against 15S/8.
    EXPECT_LT(collective_bytes(hier, kind, true) * 3, collective_bytes(ring, kind, true) * 2);
  }
  EXPECT_LT(hier.timeline.makespan, ring.timeline.makespan);
}

}  // namespace
}  // namespace pipesim
