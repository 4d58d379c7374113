// Max-min sharing: the heap-ordered progressive filling against the reference scan on
// random topologies and random flow sets. Both must agree bit for bit: the same flows
// re-projected at every change, the same finish times, the same load on every link.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/units.h"
#include "schedules/collectives.h"
#include "sim/engine.h"
#include "sim/network.h"
#include "tests/support.h"
#include "topology/cluster.h"

namespace pipesim {
namespace {

std::string fmt_name(const char* prefix, int i) {
  return std::string(prefix) + std::to_string(i);
}

// A random connected graph: GPUs and switches joined by a random spanning tree plus extra
// links (parallel ones included). Bandwidths come from a short list so that ties between
// bottlenecks are common; one in ten links is unlimited.
Cluster random_cluster(std::mt19937_64& rng) {
  ClusterBuilder b;
  const int gpus = 2 + static_cast<int>(rng() % 9), switches = static_cast<int>(rng() % 5);
  const GpuSpec& gpu = *find_gpu_preset("a100-80gb");
  std::vector<int> vertices;
  for (int i = 0; i < gpus; ++i) vertices.push_back(b.gpu_vertex(b.add_gpu(fmt_name("g", i), gpu)));
  for (int i = 0; i < switches; ++i)
    vertices.push_back(b.add_switch(fmt_name("s", i), Time::ns(static_cast<int64_t>(rng() % 3))));
  const double bandwidths[] = {1e9, 2e9, 3e9, 1e10, 12.5e9, 7e9 / 3};
  auto random_link = [&] {
    const bool unlimited = rng() % 10 == 0;
    return LinkSpec{"custom", unlimited ? LinkKind::kHost : LinkKind::kPcie,
                    unlimited ? std::numeric_limits<double>::infinity() : bandwidths[rng() % 6],
                    Time::ns(static_cast<int64_t>(rng() % 4))};
  };
  for (size_t i = 1; i < vertices.size(); ++i)
    b.add_link(vertices[i], vertices[rng() % i], random_link());
  const size_t extra = rng() % (vertices.size() + 1);
  for (size_t k = 0; k < extra; ++k) {
    const size_t x = rng() % vertices.size(), y = rng() % vertices.size();
    if (x != y) b.add_link(vertices[x], vertices[y], random_link());
  }
  return b.build();
}

constexpr size_t kFlows = 400;

// Two rates (or loads) equal to rounding: within a relative 1e-9 (a flow over unlimited
// links only has an infinite rate, equal to itself).
bool near(double x, double y) { return x == y || std::abs(x - y) <= 1e-9 * std::max(x, y); }

// Drives `x` and the reference `ref` in lockstep, like the engine does: flows start at
// random times over random routes and end at the reference's current projections (each
// network is told of both). After every start and end, `check(now, finish, a, b)` gets the
// reference's projection of every flow (Time::max() once ended) and both networks'
// updates (a: x's, b: the reference's).
template <class Check>
void drive(std::mt19937_64& rng, const Cluster& c, FlowNetwork& x, FlowNetwork& ref,
           Check&& check) {
  std::vector<Time> finish(kFlows, Time::max());
  std::vector<FlowNetwork::Update> a, b;
  uint32_t next = 0;
  Time now;
  while (true) {
    uint32_t earliest = kFlows;
    for (uint32_t f = 0; f < next; ++f) {
      if (finish[f] != Time::max() && (earliest == kFlows || finish[f] < finish[earliest]))
        earliest = f;
    }
    const Time arrival = now + Time::ns(static_cast<int64_t>(rng() % 3000));
    const bool add = next < kFlows && (earliest == kFlows || arrival < finish[earliest]);
    if (!add && earliest == kFlows) break;
    a.clear();
    b.clear();
    if (add) {
      now = arrival;
      const int src = static_cast<int>(rng() % static_cast<uint64_t>(c.num_devices()));
      int dst = static_cast<int>(rng() % static_cast<uint64_t>(c.num_devices() - 1));
      dst += dst >= src;
      const int64_t bytes = rng() % 20 == 0 ? 0 : static_cast<int64_t>(rng() % 5000000);
      const Route& r = c.route(src, dst);
      x.add(next, r, bytes, now, a);
      ref.add(next, r, bytes, now, b);
      ++next;
      x.commit(now, a);
      ref.commit(now, b);
    } else {
      now = finish[earliest];
      ASSERT_TRUE(ref.is_current(earliest, now));
      x.remove(earliest);
      ref.remove(earliest);
      x.commit(now, a);
      ref.commit(now, b);
      finish[earliest] = Time::max();
    }
    for (const auto& u : b) finish[u.flow] = u.finish;
    check(now, finish, a, b);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(MaxMinHeap, BitIdenticalToTheScanOnRandomTopologies) {
  for (uint64_t seed = 1; seed <= test::random_cases(300); ++seed) {
    std::mt19937_64 rng(seed);
    const Cluster c = random_cluster(rng);
    FlowNetwork heap(c, kFlows, FlowNetwork::Filling::kHeap);
    FlowNetwork scan(c, kFlows, FlowNetwork::Filling::kScan);
    // The same flows re-projected at every change, to the same picosecond, and the same
    // load on every link, bit for bit.
    drive(rng, c, heap, scan,
          [&](Time now, const std::vector<Time>&, const std::vector<FlowNetwork::Update>& a,
              const std::vector<FlowNetwork::Update>& b) {
            ASSERT_EQ(a.size(), b.size()) << "seed " << seed << " at " << now.seconds();
            for (size_t i = 0; i < a.size(); ++i) {
              ASSERT_EQ(a[i].flow, b[i].flow) << "seed " << seed;
              ASSERT_EQ(a[i].finish, b[i].finish) << "seed " << seed << " flow " << a[i].flow;
            }
            for (LinkDirection d = 0; d < 2 * c.num_links(); ++d) {
              const double x = heap.load(d), y = scan.load(d);
              ASSERT_EQ(std::memcmp(&x, &y, sizeof x), 0) << "seed " << seed << " link " << d;
            }
          });
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(MaxMinLocal, AgreesWithTheWholeComponentOnRandomTopologies) {
  // The local re-rating (FlowNetwork::rerate_local, here for every component) against the
  // whole-component scan: after every start and end each active flow's rate and each
  // link's load agree to rounding (relative 1e-9), and a flow's projected finish within a
  // picosecond per microsecond of transfer left.
  for (uint64_t seed = 1; seed <= test::random_cases(300); ++seed) {
    std::mt19937_64 rng(seed);
    const Cluster c = random_cluster(rng);
    FlowNetwork local(c, kFlows, FlowNetwork::Filling::kHeap, 0);
    FlowNetwork scan(c, kFlows, FlowNetwork::Filling::kScan);
    std::vector<Time> local_finish(kFlows, Time::max());
    drive(rng, c, local, scan,
          [&](Time now, const std::vector<Time>& finish, const std::vector<FlowNetwork::Update>& a,
              const std::vector<FlowNetwork::Update>&) {
            for (const auto& u : a) local_finish[u.flow] = u.finish;
            for (uint32_t f = 0; f < kFlows; ++f) {
              // Not started, ended, or ending now (its rate is moot).
              if (finish[f] == Time::max() || finish[f] == now) continue;
              ASSERT_TRUE(near(local.rate(f), scan.rate(f)))
                  << "seed " << seed << " flow " << f << ": " << local.rate(f) << " vs "
                  << scan.rate(f);
              const double left_us = (finish[f] - now).seconds() * 1e6;
              EXPECT_LE(std::abs((local_finish[f] - finish[f]).seconds()) * 1e12, 1 + left_us)
                  << "seed " << seed << " flow " << f;
            }
            for (LinkDirection d = 0; d < 2 * c.num_links(); ++d)
              ASSERT_TRUE(near(local.load(d), scan.load(d))) << "seed " << seed << " link " << d;
          });
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(MaxMinBatch, OneCommitPerMomentAgreesWithOneCommitPerChange) {
  // Starts and ends that share a moment are re-rated together (FlowNetwork::commit). Max-min
  // sharing depends only on the flows present, so one commit per moment must leave every
  // flow the rate one commit per change leaves it, to rounding, and project it to within a
  // picosecond per microsecond of transfer left. Moments here bring 1 to 12 changes: new
  // flows over random routes and the ends of flows due then.
  for (uint64_t seed = 1; seed <= test::random_cases(200); ++seed) {
    std::mt19937_64 rng(seed);
    const Cluster c = random_cluster(rng);
    // Batched: the heap, local re-rating for components past 4 flows; one by one: the scan.
    FlowNetwork batched(c, kFlows, FlowNetwork::Filling::kHeap, 4);
    FlowNetwork single(c, kFlows, FlowNetwork::Filling::kScan);
    std::vector<Time> finish(kFlows, Time::max()), batched_finish(kFlows, Time::max());
    std::vector<FlowNetwork::Update> a, b;
    uint32_t next = 0;
    Time now;
    for (int moment = 0; moment < 60 && next < kFlows; ++moment) {
      now = now + Time::ns(1 + static_cast<int64_t>(rng() % 2000));
      // Flows the reference projects to end by now end now (their bytes are through).
      a.clear();
      b.clear();
      for (uint32_t f = 0; f < next; ++f) {
        if (finish[f] > now) continue;
        batched.remove(f);
        single.remove(f);
        single.commit(now, b);
        finish[f] = batched_finish[f] = Time::max();
      }
      const int starts = 1 + static_cast<int>(rng() % 12);
      for (int k = 0; k < starts && next < kFlows; ++k, ++next) {
        const int src = static_cast<int>(rng() % static_cast<uint64_t>(c.num_devices()));
        int dst = static_cast<int>(rng() % static_cast<uint64_t>(c.num_devices() - 1));
        dst += dst >= src;
        const int64_t bytes = 1 + static_cast<int64_t>(rng() % 5000000);
        const Route& r = c.route(src, dst);
        batched.add(next, r, bytes, now, a);
        single.add(next, r, bytes, now, b);
        single.commit(now, b);
      }
      EXPECT_FALSE(single.pending());
      batched.commit(now, a);
      EXPECT_FALSE(batched.pending());
      for (const auto& u : b) finish[u.flow] = u.finish;
      for (const auto& u : a) batched_finish[u.flow] = u.finish;
      for (uint32_t f = 0; f < next; ++f) {
        if (finish[f] == Time::max()) continue;
        ASSERT_TRUE(batched.active(f) && single.active(f)) << "seed " << seed;
        ASSERT_TRUE(near(batched.rate(f), single.rate(f)))
            << "seed " << seed << " flow " << f << ": " << batched.rate(f) << " vs "
            << single.rate(f);
        const double left_us = (finish[f] - now).seconds() * 1e6;
        ASSERT_LE(std::abs((batched_finish[f] - finish[f]).seconds()) * 1e12, 1 + left_us)
            << "seed " << seed << " flow " << f;
      }
    }
  }
}

TEST(ExactSharing, ATreeOverTheClusterAgreesWithTheLocalRerating) {
  // A 1 GiB double-binary-tree all-reduce over 16 nodes of 8 GPUs: the tree's flows all
  // share NIC links, so its component holds more than kLocalAbove flows and is re-rated
  // locally by default. With SimOptions::exact_sharing every event re-fills the whole
  // component (progressive filling from scratch, the oracle above). The local re-rating
  // keeps the rates of flows outside its region as they were computed at earlier events,
  // so the two agree to rounding, not bit for bit: every op's end within 10^-9 of the
  // makespan (at most a picosecond per millisecond).
  const Cluster c =
      ClusterBuilder::shorthand(16, 8, *find_gpu_preset("h100-80gb"), *find_link_preset("nvswitch"),
                                *find_link_preset("ib-ndr"));
  std::vector<CollectiveMember> members;
  for (int d = 0; d < c.num_devices(); ++d)
    members.push_back({d, c.device(d).node, {}, UINT32_MAX});
  TaskGraphBuilder b(c.num_devices());
  add_allreduce(b, AllReduceAlgo::kTree, members, int64_t{1} << 30, {0, 0});
  const TaskGraph g = std::move(b).build();
  SimOptions exact;
  exact.exact_sharing = true;
  const Timeline a = simulate(g, c), x = simulate(g, c, exact);
  ASSERT_EQ(a.end.size(), x.end.size());
  const double tolerance_ps = 1e-9 * x.makespan.seconds() * 1e12;
  for (size_t i = 0; i < a.end.size(); ++i)
    ASSERT_LE(std::abs((a.end[i] - x.end[i]).seconds()) * 1e12, tolerance_ps) << "op " << i;
  // The flag takes the other path: 408 of the 8,128 end times differ (by at most 7 ps).
  EXPECT_NE(a.end, x.end);
  EXPECT_EQ(simulate(g, c, exact).end, x.end);  // and the exact run is deterministic
}

}  // namespace
}  // namespace pipesim
