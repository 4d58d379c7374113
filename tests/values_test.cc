// A scenario is a value: another strategy or micro-batch in place of its own
// (with_strategy, with_micro_batch) gives what loading the file with that strategy written
// in it gives, checked the same way; the planner plans values; a cluster copy shares its
// routes until its bandwidths change.
#include <gtest/gtest.h>

#include "core/error.h"
#include "planner/judge.h"
#include "planner/planner.h"
#include "scenario/scenario.h"
#include "scenario/setup.h"
#include "sim/engine.h"
#include "tests/support.h"

namespace pipesim {
namespace {

Time makespan(const Scenario& sc) {
  return simulate(scenario_task_graph(sc, true), sc.cluster).makespan;
}

// Everything the strategy resolves to, compared field by field.
void expect_same(const Scenario& a, const Scenario& b) {
  const Strategy &x = a.strategy, &y = b.strategy;
  EXPECT_EQ(x.schedule, y.schedule);
  EXPECT_EQ(x.stages, y.stages);
  EXPECT_EQ(x.data, y.data);
  EXPECT_EQ(x.virtual_stages, y.virtual_stages);
  EXPECT_EQ(x.tensor, y.tensor);
  EXPECT_EQ(x.sequence_parallel, y.sequence_parallel);
  EXPECT_EQ(x.zero, y.zero);
  EXPECT_EQ(x.recompute, y.recompute);
  EXPECT_EQ(x.warmup, y.warmup);
  EXPECT_EQ(x.context, y.context);
  EXPECT_EQ(x.expert, y.expert);
  EXPECT_EQ(x.allreduce, y.allreduce);
  EXPECT_EQ(x.bucket_bytes, y.bucket_bytes);
  EXPECT_EQ(a.training.micro_batch, b.training.micro_batch);
  EXPECT_EQ(a.micro_batches, b.micro_batches);
  EXPECT_EQ(a.placement, b.placement);
  EXPECT_EQ(a.explicit_placement, b.explicit_placement);
  ASSERT_EQ(a.model.layers.size(), b.model.layers.size());
  for (size_t l = 0; l < a.model.layers.size(); ++l) {
    EXPECT_EQ(a.model.layers[l].forward, b.model.layers[l].forward) << "layer " << l;
    EXPECT_EQ(a.model.layers[l].activation_bytes, b.model.layers[l].activation_bytes);
  }
  EXPECT_EQ(makespan(a), makespan(b));
}

// Strategies of every kind, as a user writes them.
const char* const kStrategies[] = {
    "{schedule: dapple, pipeline: 4, data: 4}",
    "{schedule: gpipe-recompute, stages: [{layers: 0-9}, {layers: 10-25}], data: 8}",
    "{schedule: interleaved, pipeline: 2, virtual_stages: 2, data: 2, tensor: 2, "
    "sequence_parallel: true, zero: 1}",
    "{schedule: zb-v, pipeline: 4, data: 2, placement: scatter-first}",
    "{schedule: 1f1b, pipeline: 2, data: 4, recompute: selective, warmup: auto, zero: 2}",
    "{schedule: dapple, stages: [{layers: 0-12, replicas: 2}, {layers: 13-25, replicas: 2}], "
    "placement: [[node0/gpu0, node1/gpu0], [node0/gpu1, node1/gpu1]]}",
};

TEST(Values, WithStrategyIsTheWrittenStrategy) {
  const Scenario base = load_default_scenario();
  for (const char* text : kStrategies) {
    SCOPED_TRACE(text);
    const Scenario written = load_default_scenario({{"strategy", text}});
    expect_same(with_strategy_yaml(base, text, "test"), written);
    expect_same(with_strategy(base, written.strategy, placement_request(written)), written);
  }
}

TEST(Values, WithMicroBatchPricesTheModelAgain) {
  const Scenario base = load_default_scenario();
  // The default's layers are generated: a micro-batch of 4 doubles each layer's tokens.
  const Scenario four = with_micro_batch(base, 4);
  expect_same(four, load_default_scenario({{"training.micro_batch", "4"}}));
  EXPECT_EQ(four.micro_batches, 64 / (4 * 4));
  EXPECT_GT(four.model.layers[1].forward, base.model.layers[1].forward);
  // `pipeline: N` splits the layers again as priced at the new size.
  const Scenario piped = load_default_scenario({{"strategy", kStrategies[0]}});
  expect_same(with_micro_batch(piped, 1),
              load_default_scenario({{"strategy", kStrategies[0]}, {"training.micro_batch", "1"}}));
}

// The check is the loader's: the same problem, the key, and no file for a value.
TEST(Values, AStrategyThatDoesNotFitNamesItsKey) {
  const Scenario base = load_default_scenario();
  const auto refused = [&](Strategy st, const std::string& key, const std::string& problem) {
    try {
      (void)with_strategy(base, st);
      ADD_FAILURE() << key << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), key);
      EXPECT_NE(std::string(e.problem()).find(problem), std::string::npos) << e.problem();
      EXPECT_TRUE(e.where().file.empty());
    }
  };
  Strategy st = base.strategy;
  st.schedule = ScheduleKind::kPipeDream;
  st.zero = 1;
  refused(st, "strategy.zero", "keeps whole weight versions");
  st = base.strategy;
  st.tensor = 0;
  refused(st, "strategy.tensor", "0 is out of range");
  st = base.strategy;
  st.stages[1].first_layer = 16;
  refused(st, "strategy.stages.1.layers", "starts at layer 16");
  st = base.strategy;
  st.data = 3;
  refused(st, "training.global_batch", "not a multiple of micro_batch x data");
  st = base.strategy;
  st.data = 8;  // 2 stages x 2 replicas x 8 copies: 32 GPUs on a cluster of 16
  refused(st, "strategy.placement", "needs 32 GPUs");
  StrategyPlacement twice{.policy = {}, .given_lists = true, .lists = {{0, 1}, {1, 2}}};
  st = base.strategy;
  st.data = 1;
  try {
    (void)with_strategy(base, st, twice);
    ADD_FAILURE() << "a device given two stages was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "strategy.placement.1.0");
  }
  // The loader says the same of the written strategy, with its place in the file.
  try {
    (void)load_default_scenario({{"strategy.tensor", "0"}});
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "strategy.tensor");
    EXPECT_EQ(e.where().file, "--set");
  }
}

// A model given as layers in code cannot be priced at another micro-batch: said.
TEST(Values, AModelBuiltInCodeKeepsItsMicroBatch) {
  Scenario base = load_default_scenario();
  base.price_model = nullptr;
  EXPECT_NO_THROW((void)with_strategy(base, base.strategy));
  try {
    (void)with_micro_batch(base, 4);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "training.micro_batch");
  }
}

// The planner's candidates as values are what their strategy sections read back as.
TEST(Values, PlanPointsAreTheirWrittenStrategies) {
  const Scenario base = load_default_scenario();
  std::vector<planner::PlanPoint> points;
  planner::PlanPoint p;
  p.stages = {{0, 12, 2, {}, {}, {}}, {13, 25, 2, {}, {}, {}}};
  p.data = 4;
  p.micro_batch = 2;
  points.push_back(p);
  p.schedule = ScheduleKind::kGpipeRecompute;
  p.micro_batch = 4;
  p.data = 2;
  points.push_back(p);
  p.schedule = ScheduleKind::kInterleaved;
  p.stages = {{0, 5, 1, {}, {}, {}},
              {6, 12, 1, {}, {}, {}},
              {13, 19, 1, {}, {}, {}},
              {20, 25, 1, {}, {}, {}}};
  p.virtual_stages = 2;
  p.tensor = 2;
  p.sequence_parallel = true;
  p.zero = 1;
  p.micro_batch = 1;
  p.data = 4;
  points.push_back(p);
  p.schedule = ScheduleKind::kZbV;
  p.virtual_stages = 2;
  p.tensor = 1;
  p.sequence_parallel = false;
  p.placement = PlacementPolicy::kScatterFirst;
  p.stage_placement = {PlacementPolicy::kFreshFirst, PlacementPolicy::kScatterFirst};
  points.push_back(p);
  const PlanOptions options;
  const planner::Judge judge(base, options);
  for (const planner::PlanPoint& q : points) {
    SCOPED_TRACE(planner::strategy_json(q, base).dump());
    std::vector<Override> with{{"strategy", planner::strategy_json(q, base).dump()}};
    if (q.micro_batch != base.training.micro_batch)
      with.push_back({"training.micro_batch", std::to_string(q.micro_batch)});
    expect_same(judge.scenario_of(q), load_default_scenario(with));
  }
}

TEST(Values, PlanTakesAScenarioValue) {
  PlanOptions o;
  o.top = 3;
  o.baselines = false;
  o.threads = 1;
  Plan from_file = plan("", {}, o);
  Plan from_value = plan(load_default_scenario(), o);
  for (Plan* p : {&from_file, &from_value}) p->wall_s = p->analytic_s = 0;  // the clock's
  EXPECT_EQ(to_json(from_file).dump(), to_json(from_value).dump());
}

// A copy shares the routes found so far; a slowdown on the copy leaves the original's alone.
TEST(Values, AClusterCopySharesRoutesUntilItsBandwidthsChange) {
  const Scenario base = load_default_scenario();
  const Cluster& a = base.cluster;
  const Route& before = a.route(0, 8);
  Cluster b = a;
  EXPECT_EQ(&b.route(0, 8), &before);  // the same cached route
  // node0/gpu0 -> node1/gpu0 crosses the 25 Gbit/s Ethernet (3.125e9 B/s), its slowest
  // link: halved on the copy, the copy's route is half as fast; the original's is not.
  EXPECT_DOUBLE_EQ(before.bottleneck_bytes_per_s, 25e9 / 8);
  int link = -1;
  for (LinkDirection d : before.hops)
    if (a.link(d / 2).spec.bytes_per_s == before.bottleneck_bytes_per_s) link = d / 2;
  ASSERT_GE(link, 0);
  b.slow_down_link(link, 0.5);
  EXPECT_EQ(a.route(0, 8).bottleneck_bytes_per_s, 25e9 / 8);
  EXPECT_EQ(b.route(0, 8).bottleneck_bytes_per_s, 25e9 / 16);
  EXPECT_EQ(b.link(link).spec.bytes_per_s, 0.5 * a.link(link).spec.bytes_per_s);
}

}  // namespace
}  // namespace pipesim
