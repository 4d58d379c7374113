// `pipesim sweep` (SPEC section 7): grid expressions, point order, thread-count
// independence, failing points, agreement with `pipesim run`, and the distributed map that
// the sweep and the planner share.
#include "sweep/sweep.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "parallel/distributed.h"
#include "planner/candidate_io.h"
#include "tests/support.h"

namespace pipesim {
namespace {

using nlohmann::json;
using Values = std::vector<std::string>;

TEST(SweepGrid, ListsRangesAndDoublingRanges) {
  EXPECT_EQ(parse_grid_axis("strategy.schedule=gpipe,dapple,zb-h1").values,
            (Values{"gpipe", "dapple", "zb-h1"}));
  EXPECT_EQ(parse_grid_axis("training.micro_batch=1..5").values, (Values{"1", "2", "3", "4", "5"}));
  // Doubling: 1, 2, 4, ... while not past 64; the end need not be on the sequence.
  EXPECT_EQ(parse_grid_axis("k=1..64*2").values, (Values{"1", "2", "4", "8", "16", "32", "64"}));
  EXPECT_EQ(parse_grid_axis("k=3..100*3").values, (Values{"3", "9", "27", "81"}));
  EXPECT_EQ(parse_grid_axis("k=-2..1").values, (Values{"-2", "-1", "0", "1"}));
  EXPECT_EQ(parse_grid_axis("k=7..7").values, (Values{"7"}));
  // Ranges and plain items mix; spaces around items go.
  EXPECT_EQ(parse_grid_axis("k=1, 4..6 ,100").values, (Values{"1", "4", "5", "6", "100"}));
  // A path with '..' is a value, not a range.
  EXPECT_EQ(parse_grid_axis("model.profile=../a.csv").values, (Values{"../a.csv"}));
  const GridAxis a = parse_grid_axis("strategy.stages.0.replicas=2");
  EXPECT_EQ(a.key, "strategy.stages.0.replicas");
}

TEST(SweepGrid, CommasInsideBracesBracketsAndQuotesDoNotSplit) {
  EXPECT_EQ(parse_grid_axis("strategy={schedule: gpipe, pipeline: 4},{schedule: dapple, "
                            "stages: [{layers: 0-3}, {layers: 4-7}]}")
                .values,
            (Values{"{schedule: gpipe, pipeline: 4}",
                    "{schedule: dapple, stages: [{layers: 0-3}, {layers: 4-7}]}"}));
  EXPECT_EQ(parse_grid_axis("cluster.inter_node.bandwidth=\"10 GB/s\",'1,5 GB/s'").values,
            (Values{"\"10 GB/s\"", "'1,5 GB/s'"}));
  EXPECT_EQ(parse_grid_axis("k=[1, 2],[3]").values, (Values{"[1, 2]", "[3]"}));
}

TEST(SweepGrid, MalformedExpressionsAreInputErrors) {
  for (const char* bad : {"no-equals", "=1,2", "k=", "k=1,,2", "k=1,", "k={a: 1", "k=a}",
                          "k=[1, 2}", "k='open", "k=5..1", "k=1...4", "k=0..64*2", "k=1..64*1",
                          "k=1..2..3", ".k=1", "a..b=1", "k=1..2000000"}) {
    EXPECT_THROW(parse_grid_axis(bad), InputError) << bad;
  }
  try {
    parse_grid_axis("k=1,,2");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.message(),
              "--grid: k: an empty value in '1,,2' (KEY=VALUES with VALUES a,b,c, an integer "
              "range 1..64 or a doubling range 1..64*2)");
  }
}

TEST(SweepGrid, CartesianOrderHasTheFirstAxisSlowestAndZipPairs) {
  const std::vector<GridAxis> axes{{"a", {"1", "2"}}, {"b", {"x", "y", "z"}}};
  const Grid product(axes, false);
  ASSERT_EQ(product.size(), 6u);
  std::vector<std::string> seen;
  for (size_t i = 0; i < product.size(); ++i) {
    const auto o = product.overrides(i);
    seen.push_back(o[0].value + o[1].value);
  }
  EXPECT_EQ(seen, (Values{"1x", "1y", "1z", "2x", "2y", "2z"}));

  const Grid zipped({{"a", {"1", "2", "3"}}, {"b", {"x", "y", "z"}}}, true);
  ASSERT_EQ(zipped.size(), 3u);
  EXPECT_EQ(zipped.overrides(2)[0].value + zipped.overrides(2)[1].value, "3z");
  EXPECT_THROW(Grid(axes, true), InputError);                           // 2 vs 3 values
  EXPECT_THROW(Grid({{"a", {"1"}}, {"a", {"2"}}}, false), InputError);  // same key twice
  // 1000^3 points is past the limit.
  GridAxis big{"k", {}};
  for (int i = 0; i < 1000; ++i) big.values.push_back(std::to_string(i));
  EXPECT_THROW(Grid({big, {"l", big.values}, {"m", big.values}}, false), InputError);
  EXPECT_EQ(Grid({}, false).size(), 1u);  // no axis: the scenario itself
}

// 4 stages of 1 ms forward + 1 ms backward, no communication cost: GPipe's iteration is
// (M + S - 1)(t_f + t_b) = (M + 3) * 2 ms with M = global_batch (micro-batches of one).
std::string four_stages() {
  test::PipeSpec p;
  p.schedule = "gpipe";
  return test::write_temp("sweep4.yaml", test::to_yaml(p));
}

TEST(SweepCli, RowsFollowTheClosedFormAndAgreeWithRun) {
  const std::string file = four_stages(), csv = test::temp_path("s.csv"),
                    js = test::temp_path("s.json");
  const auto r =
      test::cli({"sweep", file, "--grid", "training.global_batch=4..16*2", "--grid",
                 "strategy.schedule=gpipe,dapple", "--csv", csv, "--json", js, "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("6 points, 0 failed, 0 out of memory"), std::string::npos) << r.out;
  const json j = json::parse(test::read_file(js));
  ASSERT_EQ(j["points"].size(), 6u);
  EXPECT_EQ(j["keys"], json({"training.global_batch", "strategy.schedule"}));
  for (const json& p : j["points"]) {
    const int m = p["training.global_batch"].get<int>();
    const std::string schedule = p["strategy.schedule"];
    // Both schedules have the same fill and drain: (M + 3) * 2 ms.
    EXPECT_NEAR(p["makespan_s"].get<double>(), (m + 3) * 2e-3, 1e-12) << m << schedule;
    // The same point through `pipesim run` gives the same numbers, to the last bit.
    const auto one = test::cli({"run", file, "--set", "training.global_batch=" + std::to_string(m),
                                "--set", "strategy.schedule=" + schedule, "--json", "-"});
    ASSERT_EQ(one.code, 0) << one.err;
    const json rep = json::parse(one.out);
    for (const char* k : {"makespan_s", "iteration_time_s", "throughput_samples_per_s",
                          "bubble_fraction", "oom", "mfu"})
      EXPECT_EQ(p[k], rep[k]) << k;
    int64_t peak = 0;
    for (const json& d : rep["devices"])
      peak = std::max(peak, d["peak_memory_bytes"].get<int64_t>());
    EXPECT_EQ(p["peak_memory_bytes"].get<int64_t>(), peak);
  }
  // The CSV: swept keys, then SPEC section 7's columns; gpipe with M = 4 first.
  const std::string text = test::read_file(csv);
  EXPECT_TRUE(text.starts_with(
      "training.global_batch,strategy.schedule,makespan_s,iteration_time_s,"
      "throughput_samples_per_s,peak_memory_bytes,oom,bubble_fraction,mfu,error\n4,gpipe,0.014,"))
      << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 7);
}

TEST(SweepCli, OutputIsTheSameWhateverTheThreadCount) {
  const std::string file = four_stages();
  std::string csv[2], js[2];
  const char* threads[] = {"1", "4"};
  for (int t = 0; t < 2; ++t) {
    const std::string c = test::temp_path(fmt::format("t{}.csv", t)),
                      j = test::temp_path(fmt::format("t{}.json", t));
    const auto r = test::cli({"sweep", file, "--grid", "training.global_batch=1..24", "--grid",
                              "strategy.schedule=gpipe,dapple,bogus", "--threads", threads[t],
                              "--csv", c, "--json", j, "--quiet"});
    ASSERT_EQ(r.code, 0) << r.err;
    csv[t] = test::read_file(c);
    js[t] = test::read_file(j);
  }
  EXPECT_EQ(csv[0], csv[1]);
  EXPECT_EQ(js[0], js[1]);
  EXPECT_EQ(std::count(csv[0].begin(), csv[0].end(), '\n'), 1 + 24 * 3);
}

TEST(SweepCli, AFailingPointIsRecordedAndTheSweepGoesOn) {
  const std::string file = four_stages(), js = test::temp_path("fail.json"),
                    csv = test::temp_path("fail.csv");
  // 3 stages need at least... the pipeline of 4 layers cannot take 5 stages.
  const auto r = test::cli(
      {"sweep", file, "--grid", "strategy.pipeline=2,5,4", "--json", js, "--csv", csv, "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(test::read_file(js));
  ASSERT_EQ(j["points"].size(), 3u);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_TRUE(j["points"][0]["error"].is_null());
  EXPECT_TRUE(j["points"][2]["error"].is_null());
  const json& bad = j["points"][1];
  EXPECT_TRUE(bad["makespan_s"].is_null());
  // The message `pipesim run` would print for that point.
  const auto one = test::cli({"run", file, "--set", "strategy.pipeline=5"});
  EXPECT_EQ(one.code, 2);
  EXPECT_EQ("pipesim: error: " + bad["error"].get<std::string>() + "\n", one.err);
  // In the CSV the message is one quoted field when it holds commas or quotes.
  const std::string text = test::read_file(csv);
  EXPECT_NE(text.find("\n5,,,,,,,,"), std::string::npos) << text;
}

TEST(SweepCli, OutOfMemoryIsAResultNotAnError) {
  test::PipeSpec p;
  p.activation = "30 GiB";  // a100-80gb: 4 micro-batches in flight do not fit
  const std::string file = test::write_temp("oom.yaml", test::to_yaml(p));
  const auto r =
      test::cli({"sweep", file, "--grid", "training.global_batch=1,4", "--json", "-", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["points"][0]["oom"], false);  // one micro-batch: 30 GiB
  EXPECT_EQ(j["points"][1]["oom"], true);   // dapple keeps 4 on stage 0: 120 GiB
  EXPECT_TRUE(j["points"][1]["error"].is_null());
  EXPECT_EQ(j["out_of_memory"], 1);
}

TEST(SweepCli, BadGridsAreExitTwoWithOneLine) {
  const std::string file = four_stages();
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--grid", "k=1,,2"},
                                               {"--grid", "k={a"},
                                               {"--grid", "k=9..1"},
                                               {"--grid", "a=1,2", "--grid", "b=1,2,3", "--zip"},
                                               {"--grid", "oom=1"},
                                               {"--grid", "a=1", "--grid", "a=2"},
                                               {"--threads", "0", "--grid", "a=1"},
                                               {"--grid", "a=1", "--csv", "-", "--json", "-"},
                                               {"--grid", "a=1", "--csv", ""}}) {
    std::vector<std::string> full{"sweep", file};
    full.insert(full.end(), args.begin(), args.end());
    const auto r = test::cli(full);
    EXPECT_EQ(r.code, 2) << args[1];
    EXPECT_TRUE(r.err.starts_with("pipesim: error: ")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST(SweepCli, EveryPointFailingIsExitTwoWithTheFirstMessage) {
  const std::string file = four_stages(), js = test::temp_path("allbad.json");
  std::filesystem::remove(js);
  const auto r =
      test::cli({"sweep", file, "--grid", "strategy.frobnicate=1,2", "--json", js, "--quiet"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.starts_with("pipesim: error: every point of the sweep failed, the first "
                                 "with: "))
      << r.err;
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // No file of failures only, which would read as a result (once written all the same).
  EXPECT_NE(r.err.find("(no output file written)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(js));
}

TEST(SweepCli, ZipSetsAndProgress) {
  const std::string file = four_stages();
  const auto r = test::cli({"sweep", file, "--grid", "training.global_batch=4,8", "--grid",
                            "strategy.schedule=gpipe,dapple", "--zip", "--set",
                            "strategy.pipeline=2", "--csv", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Zipped: (4, gpipe), (8, dapple); two stages of two 1 ms layers: (M + 1) * 4 ms.
  EXPECT_TRUE(r.out.find("\n4,gpipe,0.02,") != std::string::npos) << r.out;
  EXPECT_TRUE(r.out.find("\n8,dapple,0.036,") != std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
  EXPECT_NE(r.err.find("swept 2/2 points"), std::string::npos) << r.err;
}

TEST(SweepApi, RunSweepWithTheDefaultScenario) {
  SweepOptions o;
  o.threads = 2;
  const Sweep s = run_sweep("", {parse_grid_axis("strategy.schedule=gpipe,dapple")}, o);
  ASSERT_EQ(s.points.size(), 2u);
  EXPECT_EQ(s.scenario_file, "<default>");
  EXPECT_EQ(s.failed, 0u);
  ASSERT_TRUE(s.points[1].report);
  EXPECT_EQ(s.points[1].report->schedule, "dapple");
  // A point's JSON form reads back to the same point (what one MPI rank sends another).
  for (const SweepPoint& p : s.points) {
    const SweepPoint back = point_from_json(point_json(s, p));
    EXPECT_EQ(point_json(s, SweepPoint{p.values, back.report, back.error}), point_json(s, p));
  }
}

TEST(Distributed, EveryItemRunsOnceAndFailuresPropagate) {
  for (int threads : {1, 3, 8}) {
    std::vector<std::atomic<int>> runs(100);
    std::vector<size_t> reported;
    DistributedFor w;
    w.count = runs.size();
    w.threads = threads;
    w.run = [&](size_t i) { ++runs[i]; };
    w.progress = [&](size_t done, size_t here) {
      reported.push_back(done);
      EXPECT_EQ(here, 100u);
    };
    distributed_for(w);
    for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
    ASSERT_EQ(reported.size(), 100u);
    EXPECT_EQ(reported.back(), 100u);
  }
  DistributedFor w;
  w.count = 50;
  w.threads = 4;
  w.run = [](size_t i) {
    if (i == 17) throw InternalError("item 17");
  };
  EXPECT_THROW(distributed_for(w), InternalError);
  EXPECT_EQ(job_ranks().size, 1);  // no launcher here
  EXPECT_EQ(worker_threads(3, 2), 2u);
  EXPECT_EQ(worker_threads(3, 0), 1u);
}

TEST(Distributed, CandidatesTravelExactly) {
  Candidate c;
  c.strategy = {{"schedule", "dapple"}, {"data", 2}};
  c.micro_batch = 3;
  c.estimate_s = 0.1 + 0.2;  // not representable in fewer bits
  c.makespan_s = 1.0 / 3;
  c.iteration_s = 2.0 / 3;
  c.throughput = 1e300;
  c.peak_memory = int64_t{1} << 40;
  c.oom = true;
  c.why = "memory";
  const auto back = load_candidate(save_candidate(c), c.point);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->strategy, c.strategy);
  EXPECT_EQ(back->micro_batch, c.micro_batch);
  EXPECT_EQ(back->estimate_s, c.estimate_s);
  EXPECT_EQ(back->makespan_s, c.makespan_s);
  EXPECT_EQ(back->iteration_s, c.iteration_s);
  EXPECT_EQ(back->throughput, c.throughput);
  EXPECT_EQ(back->peak_memory, c.peak_memory);
  EXPECT_EQ(back->oom, c.oom);
  EXPECT_EQ(back->why, c.why);
  EXPECT_FALSE(load_candidate(save_candidate(std::nullopt), c.point));
}

}  // namespace
}  // namespace pipesim
