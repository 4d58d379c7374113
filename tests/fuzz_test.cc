// Mutation fuzzing of the scenario loader: random edits of valid scenarios must give a
// result or an InputError, never a crash, a hang, an internal error or a sanitizer report
// (CI runs this under AddressSanitizer and UndefinedBehaviorSanitizer).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/json_text.h"
#include "scenario/setup.h"
#include "scenario/work_estimate.h"
#include "sim/engine.h"
#include "sim/report.h"
#include "tests/support.h"

namespace pipesim {
namespace {

std::vector<std::string> seeds() {
  std::vector<std::string> out{default_scenario_yaml()};
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           std::string(PIPESIM_SOURCE_DIR) + "/scenarios")) {
    // Validation runs (hundreds of GPUs) are too large to mutate and simulate here.
    if (e.path().extension() != ".yaml" || e.path().parent_path().filename() == "validation")
      continue;
    const std::string text = test::read_file(e.path().string());
    if (e.path().parent_path().filename() != "models") {
      out.push_back(text);
      continue;
    }
    // A zoo model inlined into a small scenario, so mutations reach the shape layers.
    std::string model = "model:\n";
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) model += "  " + line + "\n";
    out.push_back("cluster: {gpu: v100-32gb, nodes: 1, gpus_per_node: 2, intra_node: nvlink}\n" +
                  model +
                  "training: {global_batch: 4, micro_batch: 2, precision: mixed}\n"
                  "strategy: {schedule: dapple, pipeline: 2}\n");
  }
  return out;
}

std::string mutate(std::string s, std::mt19937_64& rng) {
  static const std::vector<std::string> tokens{"-",
                                               ":",
                                               "{",
                                               "}",
                                               "[",
                                               "]",
                                               ",",
                                               "\n",
                                               " ",
                                               "0",
                                               "-1",
                                               "1e308",
                                               "999999999999",
                                               "ms",
                                               "GiB",
                                               "Gbit/s",
                                               "K",
                                               "replicas: 3",
                                               "layers: 0-0",
                                               "repeat: 100000",
                                               "nodes: 0",
                                               "pipeline: 1",
                                               "data: 7",
                                               "&a",
                                               "*a",
                                               "~",
                                               "''",
                                               "global_batch: 1",
                                               "micro_batch: 3",
                                               "placement: [[0]]",
                                               "gpu: {memory: 1 B}",
                                               "latency: 0 ps"};
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < edits && !s.empty(); ++k) {
    const size_t pos = rng() % s.size();
    switch (rng() % 6) {
      case 0:
        s.erase(pos, 1 + rng() % 8);
        break;
      case 1:
        s.insert(pos, tokens[rng() % tokens.size()]);
        break;
      case 2:
        s[pos] = static_cast<char>(32 + rng() % 95);
        break;
      case 3: {  // duplicate a line
        const size_t a = s.rfind('\n', pos), b = s.find('\n', pos);
        if (a != std::string::npos && b != std::string::npos) s.insert(b, s.substr(a, b - a));
        break;
      }
      case 4: {  // replace a number with another
        const size_t d = s.find_first_of("0123456789", pos);
        if (d != std::string::npos) s.replace(d, 1, std::to_string(rng() % 1000));
        break;
      }
      default:
        s.insert(pos, std::string(1, static_cast<char>(rng() % 256)));
        break;
    }
  }
  return s;
}

TEST(Fuzz, MutatedScenariosNeverCrash) {
  std::mt19937_64 rng(12345);
  const auto inputs = seeds();
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string text = mutate(inputs[static_cast<size_t>(i) % inputs.size()], rng);
    try {
      const Scenario s = load_scenario_text(text, "fuzz.yaml");
      // Only simulate what is small enough to keep the test fast.
      if (estimate_work(s).ops() <= 20'000) {
        const TaskGraph g = scenario_task_graph(s);
        const Timeline tl = simulate(g, s.cluster);
        EXPECT_GE(tl.makespan, Time::zero());
      }
      ++accepted;
    } catch (const InputError& e) {
      EXPECT_FALSE(e.message().empty());
      EXPECT_EQ(e.message().find('\n'), std::string::npos) << e.message();
      ++rejected;
    }
  }
  // The mutations should exercise both sides.
  EXPECT_GT(accepted, 50);
  EXPECT_GT(rejected, 500);
}

// fuzz_set's find: a name whose bytes are not UTF-8 (as `--set` gave it) once made the
// JSON report throw. Every JSON output replaces such bytes (core/json_text.h).
TEST(Fuzz, NamesThatAreNotUtf8AreWrittenReplaced) {
  const std::string line("name=\x01\0\0\0\0\0\0Ep\0! ", 17);
  const Scenario s = load_default_scenario({parse_override(line)});
  // (The override's NULs come back from the YAML parser as F0 80 80 80, not UTF-8.)
  ASSERT_NE(s.name.find("\xf0\x80"), std::string::npos);
  const TaskGraph graph = scenario_task_graph(s);
  const Timeline tl = simulate(graph, s.cluster);
  const std::string json = to_json(make_report(graph, s.cluster, tl, run_info(s, 0.0)));
  EXPECT_NE(json.find("\xef\xbf\xbd"), std::string::npos);
  EXPECT_NE(json_text(nlohmann::json(s.name)).find("\xef\xbf\xbd"), std::string::npos);
}

TEST(Fuzz, RandomOverridesNeverCrash) {
  std::mt19937_64 rng(99);
  const std::vector<std::string> keys{"cluster.nodes",
                                      "cluster.gpus_per_node",
                                      "cluster.gpu",
                                      "cluster.gpu.memory",
                                      "cluster.intra_node",
                                      "cluster.inter_node.latency",
                                      "model.layers.0.forward",
                                      "model.layers.1.repeat",
                                      "training.global_batch",
                                      "training.micro_batch",
                                      "strategy.pipeline",
                                      "strategy.schedule",
                                      "strategy.data",
                                      "strategy.placement",
                                      "model.layers.7",
                                      "strategy",
                                      "",
                                      "a..b"};
  const std::vector<std::string> values{
      "0",      "1",    "2",     "-3",    "x", "[]",           "{}",
      "[1, 2]", "1 ms", "8 GiB", "gpipe", "~", "{kind: pcie}", "scatter-first",
      "100000", "\"",   "[["};
  for (int i = 0; i < 300; ++i) {
    std::vector<Override> o;
    for (int k = 0; k < 2; ++k)
      o.push_back({keys[rng() % keys.size()], values[rng() % values.size()]});
    try {
      const Scenario s = load_default_scenario(o);
      (void)s;
    } catch (const InputError& e) {
      EXPECT_FALSE(e.message().empty());
    }
  }
}

}  // namespace
}  // namespace pipesim
