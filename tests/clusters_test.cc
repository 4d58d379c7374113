// Clusters as they are (SPEC section 10): mixed GPUs, stragglers, degraded links, failures
// and goodput. Every expected number is worked by hand in the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "api/internal/simulation.h"
#include "planner/planner.h"
#include "sim/goodput.h"
#include "tests/support.h"

namespace pipesim {
namespace {

using test::ms;
using test::run_yaml;
using test::SimRun;

// `layers` equal layers (forward 1 ms, backward 2 ms, no parameters unless `params`) on
// `gpus` GPUs of one node, pipeline `pipeline`, data `data`; `cluster_extra` goes into the
// cluster section.
std::string equal_layers(int layers, int gpus, int pipeline, int data, const std::string& extra,
                         const std::string& params = "0", int micro_batches = 4) {
  std::string model;
  for (int l = 0; l < layers; ++l)
    model += fmt::format(
        "    - {{name: l{}, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 0 B, "
        "params: {}}}\n",
        l, params);
  return fmt::format(R"(name: clusters
cluster:
  gpu: a100-80gb
  nodes: 1
  gpus_per_node: {gpus}
  intra_node: {{kind: nvlink, bandwidth: 100 GB/s, latency: 0 us}}
{extra}model:
  layers:
{model}training:
  global_batch: {batch}
  micro_batch: 1
  precision: fp32
  optimizer: sgd
strategy:
  schedule: dapple
  pipeline: {pipeline}
  data: {data}
)",
                     fmt::arg("gpus", gpus), fmt::arg("extra", extra), fmt::arg("model", model),
                     fmt::arg("batch", micro_batches * data), fmt::arg("pipeline", pipeline),
                     fmt::arg("data", data));
}

// The scenario is refused, the error naming `key`.
void expect_error_key(const std::string& yaml, const std::string& key) {
  try {
    run_yaml(yaml);
    ADD_FAILURE() << "accepted, expected an error at " << key;
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), key) << e.what();
  }
}

// Daly's expression worked by hand: M = 3600 s, tau = 1800 s, delta = 60 s, R = 600 s:
// wall = 3600 e^{600/3600} (e^{1860/3600} - 1) = 3600 x 1.181360 x 0.676418 = 2876.79 s of
// wall time per 1800 s of progress: goodput 0.625698.
TEST(Goodput, DalyWorkedByHand) {
  EXPECT_NEAR(daly_goodput(1800, 60, 600, 3600), 0.625698, 1e-6);
  // Without failures nothing is lost but the checkpoints: tau / (tau + delta).
  EXPECT_NEAR(daly_goodput(1800, 60, 0, 1e15), 1800.0 / 1860, 1e-9);
}

// The optimum against Daly's higher-order closed form (2006, eq. 37), close for delta << M:
// sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3 + delta / 18M) - delta = 10914.49 s for
// delta = 60 s, M = 10^6 s (Young's sqrt(2 delta M) = 10954 s).
TEST(Goodput, OptimumMatchesDalysClosedForm) {
  const double tau = optimal_checkpoint_interval(60, 0, 1e6);
  EXPECT_NEAR(tau, 10914.49, 0.005 * 10914.49);
  // It is the best interval: a little shorter or longer loses.
  EXPECT_GT(daly_goodput(tau, 60, 0, 1e6), daly_goodput(0.8 * tau, 60, 0, 1e6));
  EXPECT_GT(daly_goodput(tau, 60, 0, 1e6), daly_goodput(1.25 * tau, 60, 0, 1e6));
}

// 2 GPUs of mtbf_per_gpu 2000 h: the cluster fails every 1000 h = 3.6e6 s. Checkpoints of
// 1 min every 30 min, no restart cost: goodput = 1800 / (3.6e6 (e^{1860/3.6e6} - 1)) =
// 1800 / 1860.48 = 0.967492.
TEST(Goodput, InTheReport) {
  std::string yaml = equal_layers(2, 2, 2, 1, "");
  yaml.replace(yaml.find("  optimizer: sgd\n"), 17,
               "  optimizer: sgd\n  failures: {mtbf_per_gpu: 2000 h, checkpoint_every: 30 min, "
               "checkpoint_time: 1 min}\n");
  const auto r = run_yaml(yaml).report;
  ASSERT_TRUE(r.goodput);
  EXPECT_NEAR(r.goodput->goodput, 0.967492, 1e-6);
  EXPECT_NEAR(r.goodput->failures_per_day, 86400 / 3.6e6, 1e-12);
  EXPECT_NEAR(r.goodput->lost_hours_per_day, 24 * (1 - 0.967492), 1e-4);
  const auto j = nlohmann::json::parse(to_json(r));
  EXPECT_NEAR(j["goodput"].get<double>(), 0.967492, 1e-6);
  EXPECT_GT(j["checkpoint_every_optimal"].get<double>(), 1800);  // sqrt(2 x 60 x 3.6e6) ~ 2e4
}

// training.failures durations take every time unit of SPEC section 2 and min, h, d; a
// bare number or an unknown unit is an error naming the key.
TEST(Goodput, DurationsTakeEveryTimeUnit) {
  const auto with = [](const std::string& failures) {
    std::string yaml = equal_layers(2, 2, 2, 1, "");
    yaml.replace(yaml.find("  optimizer: sgd\n"), 17,
                 "  optimizer: sgd\n  failures: " + failures + "\n");
    return yaml;
  };
  // 500 us = 5e-4 s; 2 d = 172,800 s.
  const auto r =
      run_yaml(with("{mtbf_per_gpu: 2 d, checkpoint_time: 500 us, restart: 1 min}")).report;
  ASSERT_TRUE(r.info.failures);
  EXPECT_DOUBLE_EQ(r.info.failures->checkpoint_s, 5e-4);
  EXPECT_DOUBLE_EQ(r.info.failures->cluster_mtbf_s, 172800.0 / 2);
  EXPECT_DOUBLE_EQ(r.info.failures->restart_s, 60.0);
  expect_error_key(with("{mtbf_per_gpu: 50000, checkpoint_time: 1 min}"),
                   "training.failures.mtbf_per_gpu");
  expect_error_key(with("{mtbf_per_gpu: 5 weeks, checkpoint_time: 1 min}"),
                   "training.failures.mtbf_per_gpu");
  expect_error_key(with("{mtbf_per_gpu: 50000 h}"), "training.failures.checkpoint_time");
}

// A checkpoint given as a rate: 2 layers of 10^9 fp32 parameters (4 bytes each, SGD keeps
// no state) = 8 GB, written by the 2 GPUs of the one data-parallel copy at 1 GB/s each: 4 s.
TEST(Goodput, CheckpointTimeFromBandwidth) {
  std::string yaml = equal_layers(2, 2, 2, 1, "", "1B");
  yaml.replace(
      yaml.find("  optimizer: sgd\n"), 17,
      "  optimizer: sgd\n  failures: {mtbf_per_gpu: 2000 h, checkpoint_bandwidth: 1 GB/s}\n");
  const auto r = run_yaml(yaml).report;
  ASSERT_TRUE(r.info.failures);
  EXPECT_DOUBLE_EQ(r.info.failures->checkpoint_s, 4.0);
  EXPECT_NEAR(r.goodput->checkpoint_every_s, r.goodput->checkpoint_every_optimal_s, 1e-9);
}

// A 2-stage pipeline of 12 equal layers (3 ms each) on a fast GPU and one computing 2x
// slower: stage 0 takes k layers (3k ms), stage 1 the rest at 6 ms each; max(3k, 6(12 - k))
// is least at k = 8: 24 ms each.
TEST(Straggler, PipelineBalancesToTheClosedFormSplit) {
  const auto run =
      run_yaml(equal_layers(12, 2, 2, 1, "  slowdown: [{device: node0/gpu1, compute: 2}]\n"));
  const auto& st = run.scenario.strategy.stages;
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].last_layer, 7);
  EXPECT_EQ(st[1].first_layer, 8);
  // Both GPUs busy 4 micro-batches x 24 ms.
  EXPECT_EQ(run.report.devices[0].busy, ms(96));
  EXPECT_EQ(run.report.devices[1].busy, ms(96));
}

// Data parallelism over 2 GPUs, 1 layer, 4 micro-batches: each GPU computes 4 x 3 ms =
// 12 ms, then the ring all-reduce of the gradients, then the optimizer step. One GPU 1.5x
// slower computes 18 ms: the step waits for it, 6 ms longer. (The ring, 2 steps: the fast
// GPU's chunk passes the slow one before it joins; the slow GPU's part ends when its own
// chunk has gone round, 2 chunk times after it joins at 18 ms, as the fast GPU's does
// after 12 ms.)
TEST(Straggler, DataParallelRingWaitsForTheSlowGpu) {
  const std::string fast = equal_layers(1, 2, 1, 2, "", "1M");
  const std::string slow =
      equal_layers(1, 2, 1, 2, "  slowdown: [{device: node0/gpu1, compute: 1.5}]\n", "1M");
  const auto a = run_yaml(fast).report;
  const Report b = simulate_scenario(load_scenario_text(slow, "straggler.yaml")).report;
  EXPECT_EQ(b.devices[1].busy - a.devices[1].busy, ms(6));
  EXPECT_EQ(b.iteration_time - a.iteration_time, ms(6));
  // The report says who bounds it and what the slowdown costs.
  EXPECT_NE(bound_line(b).find("node0/gpu1"), std::string::npos) << bound_line(b);
  ASSERT_TRUE(b.slowdown);
  EXPECT_EQ(b.slowdown->iteration_time_without, a.iteration_time);
  const auto j = nlohmann::json::parse(to_json(b));
  EXPECT_NEAR(j["slowdown"]["cost_s"].get<double>(), 0.006, 1e-12);
}

// A degraded link: the pipeline's one link at half its bandwidth doubles the transfer.
// 2 stages, 1 layer each, output 100 MB over 100 GB/s = 1 ms; at 0.5: 2 ms.
TEST(Straggler, DegradedLinkHalvesItsBandwidth) {
  std::string yaml =
      equal_layers(2, 2, 2, 1, "  slowdown: [{link: node0/gpu0->node0/gpu1, bandwidth: 0.5}]\n");
  const auto run = run_yaml(yaml);
  const Cluster& c = run.scenario.cluster;
  EXPECT_EQ(c.transfer_time(0, 1, 100'000'000), ms(2));
  EXPECT_EQ(c.transfer_time(1, 0, 100'000'000), ms(2));  // a cable: both directions
}

// Random stragglers on a 4-stage pipeline x 2 copies (explicit stages, so the split stays):
// each GPU's busy time is its profile's times its factor exactly (to a picosecond per op),
// the makespan covers the busiest GPU, and equal inputs give equal results.
TEST(Straggler, RandomSlowdownsScaleEachGpusWork) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> factor(1.0, 3.0);
  const auto yaml = [](const std::string& extra) {
    std::string y = equal_layers(4, 8, 4, 2, extra);
    y.replace(y.find("  pipeline: 4\n"), 14,
              "  stages: [{layers: 0-0}, {layers: 1-1}, {layers: 2-2}, {layers: 3-3}]\n");
    return y;
  };
  const Report base = run_yaml(yaml("")).report;
  for (int trial = 0; trial < 5; ++trial) {
    std::string extra = "  slowdown:\n";
    std::vector<double> f(8, 1.0);
    for (int d = 0; d < 8; ++d) {
      if (rng() % 2 == 0) continue;
      f[static_cast<size_t>(d)] = std::round(factor(rng) * 100) / 100;
      extra +=
          fmt::format("    - {{device: node0/gpu{}, compute: {}}}\n", d, f[static_cast<size_t>(d)]);
    }
    if (extra == "  slowdown:\n") continue;
    const Report r = run_yaml(yaml(extra)).report;
    EXPECT_EQ(to_json(r), to_json(run_yaml(yaml(extra)).report));
    for (size_t d = 0; d < 8; ++d) {
      const double want = base.devices[d].busy.seconds() * f[d];
      EXPECT_NEAR(r.devices[d].busy.seconds(), want, 1e-9) << "trial " << trial << " gpu " << d;
      EXPECT_GE(r.makespan, r.devices[d].busy);
    }
    EXPECT_GE(r.iteration_time, base.iteration_time);
  }
}

// Where it can, placement leaves the straggler idle: 2 stages on a server of 3 GPUs whose
// first is 2x slower run on the other two, as fast as with no straggler.
TEST(Straggler, PlacementLeavesTheSlowGpuIdle) {
  const std::string fast = equal_layers(2, 3, 2, 1, "");
  const std::string slow =
      equal_layers(2, 3, 2, 1, "  slowdown: [{device: node0/gpu0, compute: 2}]\n");
  const SimRun a = run_yaml(fast);
  const SimRun b = run_yaml(slow);
  EXPECT_EQ(b.scenario.placement[0][0], std::vector<int>{1});
  EXPECT_EQ(b.scenario.placement[0][1], std::vector<int>{2});
  EXPECT_EQ(b.report.iteration_time, a.report.iteration_time);
}

// Errors name the key and what is allowed.
TEST(Straggler, BadSlowdownsAreErrors) {
  const auto fails = [](const std::string& extra, const std::string& key) {
    expect_error_key(equal_layers(2, 2, 2, 1, extra), key);
  };
  fails("  slowdown: [{device: node0/gpu9, compute: 2}]\n", "cluster.slowdown.0.device");
  fails("  slowdown: [{device: node0/gpu1, compute: 0.5}]\n", "cluster.slowdown.0.compute");
  fails("  slowdown: [{link: node0/gpu0->fabric, bandwidth: 0.5}]\n", "cluster.slowdown.0.link");
  fails("  slowdown: [{link: node0/gpu0->node0/gpu1, bandwidth: 2}]\n",
        "cluster.slowdown.0.bandwidth");
  fails("  slowdown: [{device: node0/gpu1, bandwidth: 0.5}]\n", "cluster.slowdown.0.bandwidth");
  // Slowdowns of one GPU multiply, to at most 1000; a link keeps at least 1 kB/s.
  fails("  slowdown: [{device: node0/gpu1, compute: 1000}, {device: node0/gpu1, compute: 2}]\n",
        "cluster.slowdown.1.compute");
  fails(
      "  slowdown: [{link: node0/gpu0->node0/gpu1, bandwidth: 1e-6}, "
      "{link: node0/gpu0->node0/gpu1, bandwidth: 1e-6}]\n",
      "cluster.slowdown.1.bandwidth");
}

// Mixed GPUs: an A100 node and an H100 node, one GPU each, a generated transformer on a
// 2-stage pipeline. The H100 runs a layer in less time, so it takes more layers, and each
// stage's time on its own GPU comes out within one layer of the other's.
TEST(MixedGpus, NodeGroupsBalanceStagesByEachGpusSpeed) {
  const std::string yaml = R"(name: mixed
cluster:
  node_groups:
    - {nodes: 1, gpu: a100-80gb, gpus_per_node: 1}
    - {nodes: 1, gpu: h100-80gb, gpus_per_node: 1}
  inter_node: {preset: ib-ndr}
model:
  generator: transformer
  layers: 16
  hidden: 2048
  heads: 16
  sequence: 2048
  vocab: 32000
training: {global_batch: 8, micro_batch: 1, precision: mixed, optimizer: adam}
strategy: {schedule: dapple, pipeline: 2}
)";
  const auto run = run_yaml(yaml);
  const Scenario& s = run.scenario;
  EXPECT_EQ(s.cluster.device(0).gpu.name, "a100-80gb");
  EXPECT_EQ(s.cluster.device(1).gpu.name, "h100-80gb");
  ASSERT_EQ(s.kind_layer_time.size(), 2u);
  const auto& st = s.strategy.stages;
  const int a100_layers = st[0].last_layer - st[0].first_layer + 1;
  const int h100_layers = st[1].last_layer - st[1].first_layer + 1;
  EXPECT_GT(h100_layers, a100_layers + 2);
  // Busy times within one transformer layer's time on the A100 (8 micro-batches).
  const Time layer = s.kind_layer_time[0][2] * 8;
  const Time d = run.report.devices[0].busy - run.report.devices[1].busy;
  EXPECT_LT(d < Time::zero() ? Time::zero() - d : d, layer);
  // MFU over the GPUs' own peaks: (312 + 989) / 2 TFLOPS each on average.
  EXPECT_DOUBLE_EQ(run.report.info.peak_flops_per_gpu, (312e12 + 989e12) / 2);
}

// The planner on a straggler: 12 layers of 3 ms on two GPUs, the second 2x slower, with
// failures. Data parallelism runs each copy's micro-batches whole, so the slow copy takes
// 2 x 36 ms per micro-batch where a pipeline split 8/4 takes 24 ms per stage: the plan
// is a pipeline over both GPUs (interleaved or not) with 8 layers on the fast one, and it
// carries a goodput.
TEST(MixedGpus, PlannerSplitsLayersBySpeedAndRanksByGoodput) {
  std::string yaml =
      equal_layers(12, 2, 2, 1, "  slowdown: [{device: node0/gpu1, compute: 2}]\n", "0", 16);
  yaml.replace(yaml.find("  optimizer: sgd\n"), 17,
               "  optimizer: sgd\n  failures: {mtbf_per_gpu: 2000 h, checkpoint_time: 1 min}\n");
  PlanOptions o;
  o.threads = 2;
  o.baselines = false;
  const Plan p = plan(test::write_temp("straggler.yaml", yaml), {}, o);
  ASSERT_FALSE(p.candidates.empty());
  const Candidate& best = p.candidates.front();
  ASSERT_TRUE(best.goodput);
  EXPECT_GT(*best.goodput, 0.9);
  EXPECT_DOUBLE_EQ(best.goodput_throughput(), best.throughput * *best.goodput);
  // Two devices (interleaved chunks or not): 8 layers on the fast one, 4 on the slow one.
  ASSERT_EQ(best.point.positions(), 2) << best.strategy.dump();
  int on_fast = 0;
  for (int g = 0; g < static_cast<int>(best.point.stages.size()); ++g) {
    const StageSpec& st = best.point.stages[static_cast<size_t>(g)];
    if (best.point.position_of(g) == 0) on_fast += st.last_layer - st.first_layer + 1;
  }
  EXPECT_EQ(on_fast, 8) << best.strategy.dump();
  // No bound is claimed on GPUs of different speeds, and the plan says why.
  EXPECT_EQ(p.lower_bound_s, 0);
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_NE(p.warnings.back().find("differ in speed"), std::string::npos);
}

// node_groups replace the shorthand's gpu, nodes, gpus_per_node and intra_node.
TEST(MixedGpus, NodeGroupErrorsNameTheKey) {
  const auto fails = [](const std::string& cluster, const std::string& key) {
    const std::string yaml = "name: x\ncluster:\n" + cluster +
                             "model: {layers: [{name: a, forward: 1 ms, backward: 1 ms}]}\n"
                             "training: {global_batch: 1, micro_batch: 1}\n"
                             "strategy: {pipeline: 1}\n";
    expect_error_key(yaml, key);
  };
  fails("  gpu: a100-80gb\n  node_groups: [{nodes: 1, gpu: a100-80gb}]\n", "cluster.gpu");
  fails("  node_groups: []\n", "cluster.node_groups");
  fails("  node_groups: [{gpu: a100-80gb}]\n", "cluster.node_groups.0.nodes");
  fails("  node_groups: [{nodes: 1}]\n", "cluster.node_groups.0.gpu");
  fails("  node_groups: [{nodes: 1, gpu: a100-80gb, colour: red}]\n",
        "cluster.node_groups.0.colour");
  fails(
      "  node_groups: [{nodes: 1, gpu: a100-80gb, gpus_per_node: 2}, {nodes: 1, gpu: "
      "h100-80gb, gpus_per_node: 4}]\n  inter_node: {preset: ib-ndr, nics: 4}\n",
      "cluster.inter_node.nics");
}

// The heterogeneous shorthand's routes are the graph's shortest paths, group by group.
TEST(MixedGpus, NodeGroupRoutesMatchTheSearchedOnes) {
  ClusterBuilder::NodeGroup a{1,
                              4,
                              *find_gpu_preset("a100-80gb"),
                              *find_link_preset("nvlink3"),
                              ClusterBuilder::IntraTopology::kDefault,
                              2};
  ClusterBuilder::NodeGroup b{2,
                              8,
                              *find_gpu_preset("h100-80gb"),
                              *find_link_preset("nvswitch"),
                              ClusterBuilder::IntraTopology::kDefault,
                              2};
  ClusterBuilder::ShorthandOptions o;
  o.nics = 2;
  const Cluster c = ClusterBuilder::shorthand({a, b}, *find_link_preset("ib-ndr"), o);
  ASSERT_EQ(c.num_devices(), 20);
  EXPECT_EQ(c.device(4).name, "node1/gpu0");
  EXPECT_EQ(c.device(19).node, 2);
  for (int s = 0; s < c.num_devices(); ++s) {
    for (int d = 0; d < c.num_devices(); ++d) {
      if (s == d) continue;
      const Route got = c.route(s, d);
      const Route want = c.searched_route(s, d);
      EXPECT_EQ(got.latency, want.latency) << s << "->" << d;
      EXPECT_EQ(got.bottleneck_bytes_per_s, want.bottleneck_bytes_per_s) << s << "->" << d;
      EXPECT_EQ(got.hops.size(), want.hops.size()) << s << "->" << d;
    }
  }
  EXPECT_EQ(c.nic_of(4 + 8 + 3), 2 * 2 + 1);  // node 2, GPU 3: port 3 mod 2
}

}  // namespace
}  // namespace pipesim
