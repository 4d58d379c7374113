// The planner's proven bounds (planner/bound.h) and --exhaustive's branch and bound
// (planner/exhaustive.h): bounds worked by hand on a pipeline whose makespan has a closed
// form; on every plan of small spaces simulated in full, no plan below its bounds (time or
// memory) and none below the space's lower bound; branch and bound agreeing with the whole
// space simulated; the zoo models on 2 GPUs.
#include "planner/bound.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/planner.h"
#include "tests/planner_cases.h"
#include "tests/support.h"

namespace pipesim {
namespace {

using json = nlohmann::json;

// 2 stages of one layer each, F 1 ms, B 2 ms, 4 micro-batches, no transfer time, no
// parameters. 1F1B's makespan is (M + P - 1)(F + B) = 5 x 3 = 15 ms. The plan bound's last
// position: the first micro-batch's F on stage 0 (1 ms), its 4 x 3 ms, then the last
// backward on stage 0 (2 ms): 15 ms, tight. The work bound: 4 x 6 ms over 2 GPUs, 12 ms.
TEST(Bound, OneFOneBWorkedByHand) {
  test::PipeSpec spec;
  spec.stages = 2;
  spec.micro_batches = 4;
  spec.tf_ms = {1.0};
  spec.tb_ms = {2.0};
  spec.output = "0 B";
  const test::SimRun run = test::run_pipe(spec);
  EXPECT_EQ(run.report.makespan, test::ms(15));
  const Scenario& s = run.scenario;
  const planner::CostModel cm(s);
  planner::PlanPoint p;
  p.stages = s.strategy.stages;
  p.micro_batch = s.training.micro_batch;
  p.schedule = ScheduleKind::kDapple;
  EXPECT_NEAR(planner::plan_bound(cm, p, 4), 15e-3, 1e-12);
  const auto replay = planner::OrderReplay::of(p, 4, 1);
  ASSERT_TRUE(replay.has_value());
  EXPECT_NEAR(replay->bound(cm, p), 15e-3, 1e-12);
  EXPECT_NEAR(planner::work_bound(cm, 1, 2, 0.0), 12e-3, 1e-12);
}

// GPipe on the same pipeline: all forwards, then all backwards. Its order replayed gives
// (M + P - 1)(F) + (M + P - 1)(B) = 5 + 10 = 15 ms as well; interleaving 2 chunks on 2
// positions (4 layers of F 0.5, B 1) replays to the simulator's makespan too.
TEST(Bound, OrderReplayMatchesTheSimulatorWithoutTransfers) {
  for (const char* schedule : {"gpipe", "interleaved"}) {
    test::PipeSpec spec;
    spec.stages = 2;
    spec.micro_batches = 4;
    spec.schedule = schedule;
    const bool inter = std::string(schedule) == "interleaved";
    spec.virtual_stages = inter ? 2 : 1;
    spec.tf_ms = {inter ? 0.5 : 1.0};
    spec.tb_ms = {inter ? 1.0 : 2.0};
    const test::SimRun run = test::run_pipe(spec);
    const Scenario& s = run.scenario;
    const planner::CostModel cm(s);
    planner::PlanPoint p;
    p.stages = s.strategy.stages;
    p.micro_batch = s.training.micro_batch;
    p.schedule = s.strategy.schedule;
    p.virtual_stages = s.strategy.virtual_stages;
    const auto replay = planner::OrderReplay::of(p, 4, 1);
    ASSERT_TRUE(replay.has_value()) << schedule;
    EXPECT_NEAR(replay->bound(cm, p), run.report.makespan.seconds(), 1e-12) << schedule;
    EXPECT_LE(planner::plan_bound(cm, p, 4), run.report.makespan.seconds() + 1e-12) << schedule;
  }
}

bool any_fault(const Plan& p) {
  for (const std::string& w : p.warnings) {
    if (w.find("below its bounds") != std::string::npos ||
        w.find("faster than the lower bound") != std::string::npos)
      return true;
  }
  return false;
}

// Small spaces: a profiled VGG-like model on 2 x 2 GPUs, a 4-layer transformer on 4 GPUs
// (tensor degrees, recompute, zero bubble, interleaving), PipeDream over 3 GPUs and two
// iterations of 1F1B. Every plan simulated (prune off): none below its own bounds, none
// below the space's; then branch and bound finds the same best and says it covered the space.
std::vector<std::string> small_spaces() {
  std::vector<std::string> out;
  const test::Case c = test::cases()[0];
  out.push_back(test::case_file(c, "bound-vgg"));
  out.push_back(test::small_transformer_file("bound-tf"));
  out.push_back(test::write_temp(
      "bound-async.yaml",
      "cluster: {gpu: v100-16gb, nodes: 1, gpus_per_node: 3, intra_node: nvlink}\n"
      "model:\n  layers:\n"
      "    - {name: a, forward: 2 ms, backward: 4 ms, activation: 64 MiB, output: 8 MiB, "
      "params: 10M}\n"
      "    - {name: b, repeat: 3, forward: 1 ms, backward: 2 ms, activation: 32 MiB, output: 8 "
      "MiB, params: 30M}\n"
      "training: {global_batch: 16, micro_batch: 4, precision: fp32, optimizer: momentum, "
      "iterations: 3}\n"
      "strategy: {schedule: pipedream, pipeline: 2}\n"));
  out.push_back(test::write_temp(
      "bound-iter.yaml",
      "cluster: {gpu: a100-80gb, nodes: 2, gpus_per_node: 2, intra_node: nvlink, inter_node: "
      "{kind: ethernet, bandwidth: 25 Gbit/s, latency: 10 us}}\n"
      "model:\n  layers:\n"
      "    - {name: a, repeat: 5, forward: 1 ms, backward: 2 ms, activation: 64 MiB, output: "
      "16 MiB, params: 20M}\n"
      "training: {global_batch: 16, micro_batch: 2, precision: mixed, optimizer: adam, "
      "iterations: 2}\n"
      "strategy: {schedule: dapple, pipeline: 2}\n"));
  return out;
}

TEST(Bound, NoSimulatedPlanBelowItsBoundsAndBranchAndBoundAgrees) {
  for (const std::string& file : small_spaces()) {
    PlanOptions o;
    o.threads = 2;
    o.exhaustive = true;
    o.prune = false;
    const Plan all = plan(file, {}, o);
    ASSERT_FALSE(all.candidates.empty()) << file;
    EXPECT_FALSE(any_fault(all)) << file << ": " << all.warnings.front();
    const Candidate& best = all.candidates.front();
    EXPECT_GT(all.lower_bound_s, 0) << file;
    if (!best.oom) {
      EXPECT_LE(all.lower_bound_s, best.iteration_s * (1 + 1e-9)) << file;
    }

    o.prune = true;
    o.tolerance = 0;
    const Plan bb = plan(file, {}, o);
    EXPECT_TRUE(bb.exhaustive) << file;
    EXPECT_FALSE(any_fault(bb)) << file;
    EXPECT_LE(bb.simulated, all.simulated) << file;
    EXPECT_NEAR(bb.candidates.front().throughput, best.throughput, best.throughput * 1e-9)
        << file << ": " << bb.candidates.front().strategy.dump() << " vs " << best.strategy.dump();
  }
}

// The zoo on 2 GPUs (the examples' models on one server of 2): --exhaustive finishes, at
// least as good as the planner, and covers the space (VGG-19, GNMT-16 exactly; BERT-48
// within the default 0.01 %).
TEST(Bound, ExhaustiveFinishesOnTheZooOnTwoGpus) {
  for (const char* example : {"vgg19-pipedream", "gnmt16-pipedream", "bert48-a100-ib"}) {
    const std::string file =
        std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/" + example + ".yaml";
    const std::vector<std::string> sets = {"--set", "cluster.nodes=1",
                                           "--set", "cluster.gpus_per_node=2",
                                           "--set", "strategy={schedule: dapple, pipeline: 1}"};
    std::vector<std::string> args = {"plan", file, "--quiet", "--json", "-"};
    args.insert(args.end(), sets.begin(), sets.end());
    const auto fast = test::cli(args);
    ASSERT_EQ(fast.code, 0) << example << fast.err;
    args.push_back("--exhaustive");
    const auto full = test::cli(args);
    ASSERT_EQ(full.code, 0) << example << full.err;
    const json f = json::parse(fast.out), e = json::parse(full.out);
    EXPECT_FALSE(f["exhaustive"].get<bool>());
    EXPECT_TRUE(e["exhaustive"].get<bool>()) << example;
    EXPECT_GE(e["best"]["throughput_samples_per_s"].get<double>(),
              f["best"]["throughput_samples_per_s"].get<double>() * (1 - 1e-12));
    for (const json* j : {&f, &e}) {
      EXPECT_GT((*j)["lower_bound_iteration_time_s"].get<double>(), 0);
      EXPECT_LE((*j)["lower_bound_iteration_time_s"].get<double>(),
                (*j)["best"]["iteration_time_s"].get<double>() * (1 + 1e-9));
      EXPECT_GE((*j)["optimality_gap"].get<double>(), 0);
    }
    EXPECT_NE(full.out.find("\"tolerance\""), std::string::npos);
  }
}

// Mixtral 8x7B (47 B parameters, 16 bytes each with Adam) on 2 x 80 GB: no plan of the space
// fits, and every plan's memory floor says so. --exhaustive proves it by walking the floors
// alone: it used to walk every plan of the space (the time bound prunes nothing without a
// plan that fits) and simulate up to 20,000 of them.
TEST(Bound, ExhaustiveProvesThatNothingFits) {
  const std::string file = test::write_temp("bound-nothing-fits.yaml", R"(cluster:
  gpu: h100-80gb
  nodes: 1
  gpus_per_node: 2
  intra_node: nvswitch3
model: {include: mixtral-8x7b}
training: {global_batch: 64, micro_batch: 1, precision: bf16, optimizer: adam}
strategy: {schedule: dapple, pipeline: 1, data: 2}
)");
  const auto r = test::cli({"plan", file, "--quiet", "--exhaustive"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("exhaustive: no plan of the space fits"), std::string::npos) << r.out;
  const auto j = test::cli({"plan", file, "--quiet", "--exhaustive", "--json", "-"});
  const json e = json::parse(j.out);
  EXPECT_TRUE(e["exhaustive"].get<bool>());
  EXPECT_TRUE(e["best"]["oom"].get<bool>());
}

TEST(Bound, ToleranceIsCheckedAndNeedsExhaustive) {
  const std::string file = test::case_file(test::cases()[0], "bound-tol");
  auto r = test::cli({"plan", file, "--quiet", "--tolerance", "1%"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--tolerance applies to --exhaustive only"), std::string::npos) << r.err;
  r = test::cli({"plan", file, "--quiet", "--exhaustive", "--tolerance", "150%"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--tolerance"), std::string::npos) << r.err;
  r = test::cli({"plan", file, "--quiet", "--exhaustive", "--tolerance", "1%"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("by more than 1 %"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pipesim
