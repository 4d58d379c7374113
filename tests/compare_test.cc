// `plan --compare`: the user's own strategy simulated and ranked against the planner's
// (SPEC section 6), refused before the search when it is not a valid strategy, and put
// first in the summary when it beats the planner.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "planner/planner.h"
#include "tests/planner_cases.h"
#include "tests/support.h"

namespace pipesim {
namespace {

using json = nlohmann::json;

TEST(Compare, RanksTheUsersStrategyAgainstThePlanners) {
  const std::string file = test::case_file(test::cases()[0], "compare");
  // GPipe over all four GPUs, one layer range each: far from the best on this model.
  const std::string mine =
      "{schedule: gpipe, stages: [{layers: 0-1}, {layers: 2-3}, {layers: 4-5}, {layers: 6-7}]}";
  const auto r = test::cli({"plan", file, "--quiet", "--json", "-", "--compare", mine,
                            "--compare", "{schedule: dapple, pipeline: 1, data: 4}"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["compared"].size(), 2u);
  const json& c = j["compared"][0];
  EXPECT_EQ(c["strategy"], mine);
  EXPECT_GT(c["rank"].get<int>(), 1);
  // regret = its time over the best's, less 1.
  EXPECT_NEAR(c["regret"].get<double>(),
              c["iteration_time_s"].get<double>() / j["best"]["iteration_time_s"].get<double>() - 1,
              1e-12);
  EXPECT_GT(c["regret"].get<double>(), 0);
  for (const char* key : {"iteration_time_s", "peak_memory_bytes", "oom", "why"})
    EXPECT_TRUE(c.contains(key)) << key;
  // The same in the summary.
  const auto t = test::cli({"plan", file, "--quiet", "--compare", mine});
  EXPECT_NE(t.out.find("compared 1: rank "), std::string::npos) << t.out;
}

TEST(Compare, AnInvalidStrategyIsRefusedBeforeTheSearch) {
  const std::string file = test::case_file(test::cases()[0], "compare-bad");
  const auto r = test::cli({"plan", file, "--compare", "{schedule: bogus}"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--compare strategy.schedule"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("pipesim plan: costed"), std::string::npos) << "no search ran: " << r.err;
}

TEST(Compare, AStrategyThatBeatsThePlannerIsSaidFirst) {
  Plan p;
  Candidate best;
  best.iteration_s = 2.0;
  best.throughput = 8;
  best.strategy = json::object({{"schedule", "dapple"}});
  p.candidates.push_back(best);
  Compared c;
  c.given = "{schedule: interleaved, pipeline: 2, virtual_stages: 2}";
  c.result.iteration_s = 1.8;
  c.rank = 1;
  c.regret = 1.8 / 2.0 - 1;
  p.compared.push_back(c);
  const std::string table = plan_table(p);
  EXPECT_EQ(table.rfind("your strategy 1 beats the planner's best by 10.0 %", 0), 0u) << table;
  EXPECT_EQ(to_json(p)["compared"][0]["rank"], 1);
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

// `--headroom 40%`: the best plan leaves 40 % of the 16 GiB V100s free; plans that fit but
// do not are ranked after every plan that does, marked in the JSON.
TEST(Headroom, RanksOnlyPlansThatLeaveItFree) {
  const std::string file = test::case_file(test::cases()[0], "headroom");
  const auto r = test::cli({"plan", file, "--quiet", "--json", "-", "--headroom", "40%",
                            "--top", "1000"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["headroom"].get<double>(), 0.4);
  const double capacity = 16.0 * (1 << 30);
  EXPECT_TRUE(j["best"]["within_headroom"].get<bool>());
  EXPECT_LE(j["best"]["peak_memory_bytes"].get<double>(), 0.6 * capacity);
  bool past = false;
  for (const json& c : j["candidates"]) {
    const bool within = c["within_headroom"].get<bool>();
    EXPECT_EQ(within, !c["oom"].get<bool>() && c["peak_memory_bytes"].get<double>() <= 0.6 * capacity);
    if (!within) past = true;
    EXPECT_FALSE(past && within) << "a plan within the headroom after one past it";
  }
  for (const char* bad : {"100%", "-5%", "ten"}) {
    const auto b = test::cli({"plan", file, "--quiet", "--headroom", bad});
    EXPECT_EQ(b.code, 2) << bad;
    EXPECT_NE(b.err.find("--headroom"), std::string::npos) << b.err;
  }
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

// `--fix`: the fixed dimensions keep the scenario's values in every plan simulated, by the
// planner and --exhaustive alike; an unknown one is refused with the list.
TEST(Fix, KeepsTheScenariosValues) {
  const std::string file = test::small_transformer_file("fix");
  for (const bool exhaustive : {false, true}) {
    std::vector<std::string> args = {"plan",  file,   "--quiet", "--json", "-", "--top", "1000",
                                     "--fix", "training.micro_batch", "--fix",
                                     "strategy.schedule"};
    if (exhaustive) args.push_back("--exhaustive");
    const auto r = test::cli(args);
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["fixed"].size(), 2u);
    for (const json& c : j["candidates"]) {
      EXPECT_EQ(c["strategy"]["schedule"], "zb-2p") << c.dump();
      EXPECT_FALSE(c.contains("training")) << c.dump();  // the scenario's micro-batch
    }
    if (exhaustive) {
      EXPECT_TRUE(j["exhaustive"].get<bool>());
    }
  }
  const auto bad = test::cli({"plan", file, "--quiet", "--fix", "strategy.bucket"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("cannot fix 'strategy.bucket'"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("training.micro_batch"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace pipesim
