// The baseline planners: PipeDream's VGG plan, small cases whose answer is derived by hand
// from each planner's formulas, and every plan loading on random models and clusters.
#include "planner/baselines.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "scenario/scenario.h"
#include "tests/support.h"

namespace pipesim {
namespace {

std::string scenario_yaml(const std::string& cluster, const std::string& model,
                          int64_t global_batch, int64_t micro_batch) {
  return fmt::format(R"(cluster: {{{}}}
model: {}
training: {{global_batch: {}, micro_batch: {}, precision: fp32, optimizer: momentum}}
strategy: {{schedule: dapple, pipeline: 1}}
)",
                     cluster, model, global_batch, micro_batch);
}

// The scenario with its strategy replaced by the plan; throws InputError if refused.
Scenario load_plan(const std::string& yaml, const StagePlan& p,
                   const std::string& schedule = "dapple") {
  std::string stages;
  for (const StageSpec& s : p.stages)
    stages +=
        fmt::format("{{layers: {}-{}, replicas: {}}}, ", s.first_layer, s.last_layer, s.replicas);
  return load_scenario_text(yaml, "baselines.yaml",
                            {{"strategy", fmt::format("{{schedule: {}, data: {}, stages: [{}]}}",
                                                      schedule, p.data, stages)}});
}

std::vector<int> replicas(const StagePlan& p) {
  std::vector<int> r;
  for (const StageSpec& s : p.stages) r.push_back(s.replicas);
  return r;
}

int layer(const Scenario& s, const std::string& name) {
  for (size_t i = 0; i < s.model.layers.size(); ++i)
    if (s.model.layers[i].name == name) return static_cast<int>(i);
  ADD_FAILURE() << "no layer " << name;
  return -1;
}

// PipeDream's shipped VGG-16 plan on 16 GPUs is "15-1": the convolutions on 15 replicas,
// the classifier on one. Its profile was taken at 128 images per minibatch, so we profile
// the zoo's VGG-19 at micro_batch 128 and plan one level of 16 GPUs (its `-n 16`).
//
// Differences, all from the profile: (1) our analytic times cost conv5's 14x14 layers by
// FLOPs, cheap next to the 2.36M parameters each adds to the replicated stage's all-reduce,
// so the balanced cut moves two of them to the single GPU: conv5_3, conv5_4, pool5 and the
// classifier, DAPPLE's VGG-19 15:1 cut. (2) At PipeDream's default 1 GB/s and at 2 GB/s the
// DP takes 11-4-1, whose all-reduces are smaller (the per-op roofline makes the pools and
// the memory-bound early layers slower than their FLOPs alone, which moves the balance);
// at 25 Gbit/s 15-1 wins. At 10 GB/s the cut between two convolution stages costs little
// and the DP takes 9-6-1 (89.4 ms per minibatch of 128): the memory-bound early layers, at
// the memory curve's fitted level (docs/presets.md), weigh more than their FLOPs.
// (3) PipeDream's hierarchy over 4 nodes x 4 GPUs cannot express 15-1: a stage's GPUs are
// (nodes at the top level) x (GPUs inside a node), at most 4 each, and 15 is neither.
TEST(PipeDream, Vgg19FifteenOne) {
  for (const char* bw : {"25 Gbit/s"}) {
    SCOPED_TRACE(bw);
    const std::string yaml =
        scenario_yaml(fmt::format("gpu: v100-16gb, nodes: 1, gpus_per_node: 16, "
                                  "intra_node: {{kind: pcie, bandwidth: {}}}",
                                  bw),
                      "{include: vgg19}", 2048, 128);
    const Scenario s = load_scenario_text(yaml, "vgg.yaml");
    const StagePlan p = pipedream_baseline(s);
    EXPECT_EQ(replicas(p), (std::vector<int>{15, 1})) << p.note;
    EXPECT_EQ(p.data, 1);
    ASSERT_EQ(p.stages.size(), 2u);
    EXPECT_EQ(p.stages[1].first_layer, layer(s, "conv5.2"));
    EXPECT_EQ(p.stages[1].last_layer, layer(s, "fc8"));
    EXPECT_NE(p.note.find("PipeDream DP: 15-1"), std::string::npos) << p.note;
    load_plan(yaml, p, "pipedream");
  }
  const std::string yaml = scenario_yaml(
      "gpu: v100-16gb, nodes: 4, gpus_per_node: 4, intra_node: {kind: pcie, bandwidth: 1 GB/s}, "
      "inter_node: {kind: ethernet, bandwidth: 1 GB/s}",
      "{include: vgg19}", 2048, 128);
  const StagePlan p = pipedream_baseline(load_scenario_text(yaml, "vgg.yaml"));
  int gpus = 0;
  for (int r : replicas(p)) {
    EXPECT_NE(r, 15) << p.note;
    gpus += r;
  }
  EXPECT_EQ(gpus, 16) << p.note;
}

// Two layers on 3 GPUs of one node at 1 GB/s, per minibatch: "conv" 10 ms, no parameters,
// 1 MB out; "fc" 1 ms with 100M parameters (400 MB in fp32). PipeDream's options:
//   one stage x3:       (11 ms + 4*2/3 * 400 MB / 1 GB/s) / 3 = 359 ms
//   conv x1 | fc x2:    fc = (1 ms + 4*1/2 * 400 MB / 1 GB/s) / 2 = 400.5 ms
//   conv x2 | fc x1:    max(10 / 2, 1, 2 * 1 MB / 1 GB/s) = max(5, 1, 2) = 5 ms
// so the parameter-heavy layer is not replicated and the cheap-to-replicate one is.
const char* kConvFc =
    "{layers: [{name: conv, forward: 4 ms, backward: 6 ms, activation: 1 MB, output: 1 MB},"
    " {name: fc, forward: 0.5 ms, backward: 0.5 ms, activation: 1 MB, params: 100M}]}";

TEST(PipeDream, ParameterHeavyLayerStaysSingle) {
  const std::string yaml = scenario_yaml(
      "gpu: a100-80gb, nodes: 1, gpus_per_node: 3, intra_node: {kind: pcie, bandwidth: 1 GB/s}",
      kConvFc, 16, 4);
  const StagePlan p = pipedream_baseline(load_scenario_text(yaml, "cf.yaml"));
  EXPECT_EQ(replicas(p), (std::vector<int>{2, 1})) << p.note;
  EXPECT_NE(p.note.find("predicted 5 ms/minibatch"), std::string::npos) << p.note;
  load_plan(yaml, p, "pipedream");
}

// No parameters: replicating is free, so one stage x4 takes (2+2)/4 = 1 ms, and no split
// does better (two 2 ms layers on 2 + 2 GPUs also give 1 ms, not less). With micro_batch 2
// the loader allows 2 replicas a stage: the plan becomes 2 copies of 2 where the batch
// has 2 x 2 samples or more, and is cut down to 2 replicas where it has not.
TEST(PipeDream, NoParametersMeansReplicasWithinTheMicroBatch) {
  const std::string model =
      "{layers: [{forward: 1 ms, backward: 1 ms, activation: 1 MB, output: 1 MB, repeat: 2}]}";
  const std::string cluster = "gpu: a100-80gb, nodes: 1, gpus_per_node: 4, intra_node: nvlink";
  const std::string yaml = scenario_yaml(cluster, model, 8, 2);
  StagePlan p = pipedream_baseline(load_scenario_text(yaml, "np.yaml"));
  EXPECT_EQ(replicas(p), (std::vector<int>{2})) << p.note;
  EXPECT_EQ(p.data, 2);
  EXPECT_NE(p.note.find("predicted 1 ms"), std::string::npos) << p.note;
  EXPECT_NE(p.note.find("made loadable: 4 as 2 copies of 2"), std::string::npos) << p.note;
  load_plan(yaml, p, "pipedream");

  const std::string one_micro_batch = scenario_yaml(cluster, model, 2, 2);
  p = pipedream_baseline(load_scenario_text(one_micro_batch, "np.yaml"));
  EXPECT_EQ(replicas(p), (std::vector<int>{2})) << p.note;
  EXPECT_EQ(p.data, 1);
  EXPECT_NE(p.note.find("made loadable: layers 0-1 cut from 4 to micro_batch = 2 replicas"),
            std::string::npos)
      << p.note;
  load_plan(one_micro_batch, p);
}

// The conv/fc pair on two single-GPU nodes over 1 GB/s, M = 16 / 4 = 4 micro-batches; times
// for the whole batch are 4x the per-micro-batch ones. DAPPLE's candidates:
//   one stage on both GPUs: block 44/2/4 = 5.5 ms; latency 5.5*3 + 44/4 = 27.5 ms, plus
//     the all-reduce 2*(1/2) * 400 MB / 1 GB/s = 400 ms that no drain hides: 427.5 ms;
//   conv | fc (straight, and the bipartition): stage times 40 and 4 ms, the cut's 2 * 4 MB
//     cross the network in 8 ms; block 40/4 = 10 ms; latency 10*3 + 11 + 1 MB / 1 GB/s
//     = 42 ms. Speedup 44 / 42 = 1.048.
TEST(Dapple, ParameterHeavyLayerGetsItsOwnStage) {
  const std::string yaml = scenario_yaml(
      "gpu: a100-80gb, nodes: 2, gpus_per_node: 1, "
      "inter_node: {kind: ethernet, bandwidth: 1 GB/s}",
      kConvFc, 16, 4);
  const StagePlan p = dapple_baseline(load_scenario_text(yaml, "cf.yaml"));
  EXPECT_EQ(replicas(p), (std::vector<int>{1, 1})) << p.note;
  EXPECT_EQ(p.stages[0].last_layer, 0);
  EXPECT_EQ(p.data, 1);
  EXPECT_NE(p.note.find("estimated speedup 1.048"), std::string::npos) << p.note;
  load_plan(yaml, p);
}

// BERT-48 on 2 servers of 8 V100s at 25 Gbit/s (global batch 128 of micro-batches of 2):
// DAPPLE's planner takes 2 stages of one unit each (a server), in 8 copies. Copy k runs
// each stage on GPU k of the stage's server, so a stage's gradient all-reduce stays inside
// its server; placed fresh-first, the simulation sees that layout (append-first would put
// each copy's two stages side by side and send every all-reduce over Ethernet).
TEST(Dapple, CopiesOfAStageShareTheStagesServer) {
  const std::string yaml = scenario_yaml(
      "gpu: v100-16gb, nodes: 2, gpus_per_node: 8, intra_node: nvlink, inter_node: eth25",
      "{include: bert48}", 128, 2);
  const StagePlan p = dapple_baseline(load_scenario_text(yaml, "bert.yaml"));
  ASSERT_EQ(replicas(p), (std::vector<int>{1, 1})) << p.note;
  ASSERT_EQ(p.data, 8) << p.note;
  EXPECT_EQ(p.placement, PlacementPolicy::kFreshFirst);
  Scenario placed = load_scenario_text(
      yaml, "bert.yaml",
      {{"strategy", fmt::format("{{schedule: dapple, data: 8, placement: fresh-first, stages: "
                                "[{{layers: 0-{}, replicas: 1}}, {{layers: {}-{}, replicas: 1}}]}}",
                                p.stages[0].last_layer, p.stages[1].first_layer,
                                p.stages[1].last_layer)}});
  for (const auto& copy : placed.placement) {
    EXPECT_EQ(placed.cluster.device(copy[0][0]).node, 0);
    EXPECT_EQ(placed.cluster.device(copy[1][0]).node, 1);
  }
}

// Four 1 ms layers without parameters on 4 NVLink GPUs, global batch 32 of micro-batches
// of 4; C = 4 layers x 1 ms x 8 micro-batches = 32 ms. Two copies of one stage on 2 GPUs
// (i = 2 units, rp = 2): bottleneck 32/4 = 8 ms, M = 4, latency 2*3 + 32/2/4 = 10 ms,
// speedup 3.2. Using one copy (rp = 1, M = 8) costs at least 8/8*7 + 32/8 = 11 ms, and
// two pipeline stages per copy add their transfer to the same 10 ms.
TEST(Dapple, NoParametersMeansDataParallelCopies) {
  const std::string yaml =
      scenario_yaml("gpu: a100-80gb, nodes: 1, gpus_per_node: 4, intra_node: nvlink",
                    "{layers: [{forward: 0.5 ms, backward: 0.5 ms, activation: 1 MB, output: 1 MB, "
                    "repeat: 4}]}",
                    32, 4);
  const StagePlan p = dapple_baseline(load_scenario_text(yaml, "np.yaml"));
  EXPECT_EQ(replicas(p), (std::vector<int>{2})) << p.note;
  EXPECT_EQ(p.data, 2);
  EXPECT_NE(p.note.find("estimated speedup 3.2,"), std::string::npos) << p.note;
  load_plan(yaml, p);
}

// The most GPUs copies x replicas can use: copies must divide global_batch / micro_batch,
// replicas split a micro-batch into whole samples.
TEST(DataParallel, UsesTheMostGpusTheLoaderAllows) {
  struct Case {
    int gpus;
    int64_t global, micro;
    int data, replicas;
  };
  for (const Case& c : {
           Case{16, 512, 4, 16, 1},  // 128 micro-batches: 16 copies
           Case{16, 96, 32, 1, 16},  // 3 micro-batches: 3 copies x 5 = 15 < 1 copy x 16
           Case{16, 6, 2, 3, 2},     // 3 micro-batches of 2: 3 copies x 2 samples
           Case{1, 4, 4, 1, 1},
       }) {
    SCOPED_TRACE(fmt::format("{} GPUs, batch {} / {}", c.gpus, c.global, c.micro));
    const std::string yaml = scenario_yaml(
        fmt::format("gpu: a100-80gb, nodes: 1, gpus_per_node: {}", c.gpus),
        "{layers: [{forward: 1 ms, backward: 1 ms, params: 1M, repeat: 3}]}", c.global, c.micro);
    const StagePlan p = data_parallel_baseline(load_scenario_text(yaml, "dp.yaml"));
    EXPECT_EQ(p.data, c.data) << p.note;
    EXPECT_EQ(replicas(p), (std::vector<int>{c.replicas})) << p.note;
    load_plan(yaml, p);
  }
}

// Every baseline's plan covers the layers in order and loads, on random chains of layers,
// clusters and batch sizes.
TEST(Baselines, EveryPlanLoads) {
  const std::vector<std::string> clusters = {
      "gpu: v100-16gb, nodes: 1, gpus_per_node: 1",
      "gpu: v100-16gb, nodes: 1, gpus_per_node: 4, intra_node: nvlink",
      "gpu: a100-80gb, nodes: 2, gpus_per_node: 4, intra_node: pcie, inter_node: eth25",
      "gpu: v100-32gb, nodes: 3, gpus_per_node: 2, intra_node: nvlink, inter_node: eth10",
      "gpu: a100-80gb, nodes: 4, gpus_per_node: 1, inter_node: ib-hdr",
      "gpu: v100-16gb, nodes: 2, gpus_per_node: 8, intra_node: nvlink, inter_node: eth100",
  };
  std::mt19937 rng(20240611);
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution(lo, hi)(rng); };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution(lo, hi)(rng); };
  for (int trial = 0; trial < 30; ++trial) {
    std::string layers;
    const int L = pick(1, 12);
    for (int l = 0; l < L; ++l) {
      layers += fmt::format(
          "{{forward: {:.3f} ms, backward: {:.3f} ms, activation: {} MiB, output: {} MiB, "
          "params: {}}}, ",
          uniform(0.1, 5), uniform(0.1, 10), pick(0, 300), pick(0, 64),
          pick(0, 3) * pick(0, 40'000'000));
    }
    const std::string model = "{layers: [" + layers + "]}";
    const int64_t micro = std::vector<int64_t>{1, 2, 3, 4, 8, 32}[static_cast<size_t>(pick(0, 5))];
    const int64_t global = micro * pick(1, 24);
    for (const std::string& cluster : clusters) {
      const std::string yaml = scenario_yaml(cluster, model, global, micro);
      SCOPED_TRACE(yaml);
      const Scenario s = load_scenario_text(yaml, "random.yaml");
      for (const StagePlan& p :
           {pipedream_baseline(s), dapple_baseline(s), data_parallel_baseline(s)}) {
        SCOPED_TRACE(p.note);
        ASSERT_FALSE(p.stages.empty());
        int next = 0, used = 0;
        for (const StageSpec& st : p.stages) {
          EXPECT_EQ(st.first_layer, next);
          EXPECT_LE(st.first_layer, st.last_layer);
          EXPECT_GE(st.replicas, 1);
          EXPECT_LE(st.replicas, micro);
          next = st.last_layer + 1;
          used += st.replicas;
        }
        EXPECT_EQ(next, L);
        EXPECT_LE(p.data * used, s.cluster.num_devices());
        EXPECT_EQ(global % (micro * p.data), 0);
        EXPECT_NO_THROW(load_plan(yaml, p));
      }
    }
  }
}

}  // namespace
}  // namespace pipesim
