// The command line end to end: commands, output files, exit codes, golden report.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support.h"

namespace pipesim {
namespace {

using nlohmann::json;

TEST(Cli, HelpVersionAndUsageErrors) {
  auto r = test::cli({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("run"), std::string::npos);
  EXPECT_NE(r.out.find("order"), std::string::npos);
  r = test::cli({"run", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--trace"), std::string::npos);
  r = test::cli({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("pipesim "), std::string::npos);
  r = test::cli({"run", "--frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.starts_with("pipesim: error: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = test::cli({});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.starts_with("pipesim: error: ")) << r.err;
}

TEST(Cli, RunDefaultWritesEveryReport) {
  const std::string j = test::temp_path("d.json"), t = test::temp_path("d.trace.json"),
                    c = test::temp_path("d.csv");
  // The 16-stage pipeline of single GPUs the counts below are derived for.
  const auto r = test::cli({"run", "--set", "strategy={schedule: dapple, pipeline: 16}", "--json",
                            j, "--trace", t, "--csv", c});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("makespan"), std::string::npos);
  EXPECT_NE(r.out.find("node1/gpu7"), std::string::npos);
  EXPECT_NE(r.out.find("placement"), std::string::npos);

  const json report = json::parse(test::read_file(j));
  for (const char* key :
       {"scenario", "schedule", "makespan_s", "iteration_time_s", "throughput_samples_per_s",
        "bubble_fraction", "oom", "devices", "links", "events", "wall_s"}) {
    EXPECT_TRUE(report.contains(key)) << key;
  }
  EXPECT_EQ(report["schedule"], "dapple");
  ASSERT_EQ(report["devices"].size(), 16u);
  const json& d0 = report["devices"][0];
  EXPECT_EQ(d0["name"], "node0/gpu0");
  EXPECT_EQ(d0["stage"], 0);
  for (const char* key :
       {"weights", "gradients", "optimizer", "activations", "stashed_weights", "other"}) {
    EXPECT_TRUE(d0["memory"].contains(key)) << key;
  }
  int64_t sum = 0;
  for (const auto& [k, v] : d0["memory"].items()) sum += v.get<int64_t>();
  EXPECT_EQ(sum, d0["peak_memory_bytes"].get<int64_t>());
  // The inter-node hop of the pipeline (stage 7 -> 8) crosses node0's uplink.
  bool uplink = false;
  for (const auto& l : report["links"]) uplink = uplink || l["name"] == "node0/nic->fabric";
  EXPECT_TRUE(uplink);
  EXPECT_NEAR(report["throughput_samples_per_s"].get<double>(),
              64 / report["makespan_s"].get<double>(), 1e-6);

  const json trace = json::parse(test::read_file(t));
  int complete = 0, flow_start = 0, flow_end = 0, counters = 0, processes = 0, link_counters = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    complete += ph == "X";
    flow_start += ph == "s";
    flow_end += ph == "f";
    counters += ph == "C";
    link_counters += ph == "C" && e["name"].get<std::string>().starts_with("util ");
    processes += ph == "M" && e["name"] == "process_name";
  }
  EXPECT_EQ(processes, 16 + 1);  // one per GPU, plus "network" for link utilisation
  EXPECT_GT(complete, 0);
  EXPECT_EQ(flow_start, flow_end);
  // 15 stage boundaries x 32 micro-batches x 2 directions = 960 transfers.
  EXPECT_EQ(flow_start, 960);
  EXPECT_GT(counters, 0);
  EXPECT_GT(link_counters, 0);

  const std::string csv = test::read_file(c);
  EXPECT_TRUE(csv.starts_with("device,stream,op,micro_batch,start_s,end_s\n"));
  // Compute ops: 16 devices x (32 F, 32 B, 32 W (the generated layers' weight gradients,
  // run inside their B) + 1 optimizer) plus 960 transfers, plus the header.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 16 * 97 + 960 + 1);
}

TEST(Cli, SummaryGroupsGpusRunningTheSameStages) {
  // Up to 32 GPUs, one line each (the default: 16 GPUs).
  const auto small = test::cli({"run"});
  ASSERT_EQ(small.code, 0) << small.err;
  EXPECT_NE(small.out.find("\nnode0/gpu3 "), std::string::npos) << small.out;
  EXPECT_EQ(small.out.find(".."), std::string::npos) << small.out;
  // 64 GPUs: 2 stages x 32 data-parallel copies on 8 nodes, stage 0 on the even GPUs: one
  // line per stage with the range and the count, and the placement's first and last copy.
  const std::vector<std::string> wide = {"run", "--set", "cluster.nodes=8", "--set",
                                         "strategy={schedule: dapple, pipeline: 2, data: 32}"};
  const auto grouped = test::cli(wide);
  ASSERT_EQ(grouped.code, 0) << grouped.err;
  EXPECT_NE(grouped.out.find("node0/gpu0..node7/gpu6 (32)"), std::string::npos) << grouped.out;
  EXPECT_NE(grouped.out.find("node0/gpu1..node7/gpu7 (32)"), std::string::npos) << grouped.out;
  EXPECT_EQ(grouped.out.find("\nnode0/gpu3 "), std::string::npos) << grouped.out;
  EXPECT_NE(grouped.out.find("copy 0 "), std::string::npos) << grouped.out;
  EXPECT_NE(grouped.out.find("... copies 1-30 alike"), std::string::npos) << grouped.out;
  EXPECT_NE(grouped.out.find("copy 31 "), std::string::npos) << grouped.out;
  EXPECT_EQ(grouped.out.find("copy 7 "), std::string::npos) << grouped.out;
  std::vector<std::string> all = wide;
  all.push_back("--per-device");
  const auto each = test::cli(all);
  EXPECT_NE(each.out.find("\nnode0/gpu3 "), std::string::npos) << each.out;
  EXPECT_NE(each.out.find("copy 7 "), std::string::npos) << each.out;
  EXPECT_EQ(each.out.find(".."), std::string::npos) << each.out;
}

TEST(Cli, ManualPageAndCompletionFollowTheCommandLine) {
  const auto man = test::cli({"man"});
  ASSERT_EQ(man.code, 0) << man.err;
  EXPECT_TRUE(man.out.starts_with(".TH PIPESIM 1")) << man.out;
  const auto bash = test::cli({"completion", "bash"});
  ASSERT_EQ(bash.code, 0) << bash.err;
  for (const char* command : {"run", "order", "model", "plan", "sweep", "profile", "validate"}) {
    EXPECT_NE(man.out.find(fmt::format(".SS \"pipesim {}", command)), std::string::npos)
        << command;
    EXPECT_NE(bash.out.find(fmt::format("    {})\n", command)), std::string::npos) << command;
  }
  // Options as defined, flags and options taking a value alike.
  EXPECT_NE(man.out.find("\\fB\\-\\-per\\-device\\fR"), std::string::npos);
  EXPECT_NE(man.out.find("\\fB\\-\\-grid\\fR \\fITEXT\\fR"), std::string::npos);
  EXPECT_NE(bash.out.find("--per-device"), std::string::npos);
  EXPECT_NE(bash.out.find("complete -o filenames -F _pipesim pipesim"), std::string::npos);
  // The script is valid bash.
  const std::string script = test::write_temp("pipesim.bash", bash.out);
  EXPECT_EQ(std::system(fmt::format("bash -n '{}'", script).c_str()), 0);
  const auto zsh = test::cli({"completion", "zsh"});
  EXPECT_TRUE(zsh.out.starts_with("autoload -U +X bashcompinit")) << zsh.out;
  EXPECT_EQ(test::cli({"completion", "fish"}).code, 2);
}

TEST(Cli, JsonToStdout) {
  const auto r = test::cli({"run", "--json", "-", "--reproducible"});
  ASSERT_EQ(r.code, 0);
  const json report = json::parse(r.out);
  EXPECT_EQ(report["wall_s"], 0.0);
}

TEST(Cli, GoldenDefaultReport) {
  // Regenerate with: cmake --build build --target update-golden
  const auto r = test::cli({"run", "--json", "-", "--reproducible"});
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(r.out, test::read_file(std::string(PIPESIM_SOURCE_DIR) + "/tests/golden/default.json"));
}

TEST(Cli, ExactSharingLeavesSmallComponentsAsTheyAre) {
  // The default scenario's flows meet in components far below FlowNetwork::kLocalAbove,
  // which are re-rated whole either way: --exact-sharing gives the same bytes.
  const auto r = test::cli({"run", "--json", "-", "--reproducible", "--exact-sharing"});
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(r.out, test::read_file(std::string(PIPESIM_SOURCE_DIR) + "/tests/golden/default.json"));
}

TEST(Cli, NoFoldRunsTheStepsToTheSameReport) {
  // dapple-hybrid's gradient rings are symmetric: by default they run as phases, with
  // --no-fold step by step; everything but the event count is the same.
  const std::string yaml = std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/dapple-hybrid.yaml";
  const auto folded = test::cli({"run", yaml, "--json", "-", "--reproducible"});
  const auto steps = test::cli({"run", yaml, "--json", "-", "--reproducible", "--no-fold"});
  ASSERT_EQ(folded.code, 0) << folded.err;
  ASSERT_EQ(steps.code, 0) << steps.err;
  json a = json::parse(folded.out), b = json::parse(steps.out);
  EXPECT_LT(a["events"].get<uint64_t>(), b["events"].get<uint64_t>());
  a.erase("events");
  b.erase("events");
  EXPECT_EQ(a, b);
}

TEST(Cli, OrderPrintsTheReferenceTable) {
  test::PipeSpec p;  // S = 4, M = 8, dapple
  const auto r = test::cli({"order", test::write_temp("order.yaml", test::to_yaml(p))});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "dev0: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7\n"
            "dev1: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7\n"
            "dev2: F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7\n"
            "dev3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7\n");
}

TEST(Cli, OutOfMemoryStillWritesTheReportAndExits1) {
  // The default model and cluster as a 16-stage pipeline of single GPUs. GPipe keeps all M = 32
  // micro-batches' activations. The head stage (node1/gpu7) holds 51.5 M params x 16 B = 0.767 GiB
  // plus 589 MiB per forward: it crosses 16 GiB on the 27th forward, F26 ((16 - 0.767) / 0.575
  // = 26.5). Stage 0 stays under: 0.97 GiB static + 32 x 456 MiB = 15.2 GiB.
  const std::string j = test::temp_path("oom.json");
  const auto r =
      test::cli({"run", "--set", "strategy={schedule: gpipe, pipeline: 16}", "--json", j});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.err.starts_with("pipesim: error: out of memory: node1/gpu7 needs")) << r.err;
  EXPECT_NE(r.err.find("op F26 crossed"), std::string::npos) << r.err;
  const json report = json::parse(test::read_file(j));
  EXPECT_TRUE(report["oom"].get<bool>());
  EXPECT_EQ(report["oom_detail"]["device"], "node1/gpu7");
  EXPECT_EQ(report["oom_detail"]["op"], "F26");
}

TEST(Cli, UnwritableOutputLeavesNothingBehind) {
  const auto r = test::cli({"run", "--json", "/nonexistent-dir/r.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(
      r.err,
      "pipesim: error: /nonexistent-dir/r.json: cannot create the output file: No such file or "
      "directory (a writable path)\n");
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-dir"));
}

TEST(Cli, EveryShippedScenarioRuns) {
  int count = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           std::string(PIPESIM_SOURCE_DIR) + "/scenarios")) {
    // Model files are included by others; validation runs are large (docs/validation.md).
    const auto dir = e.path().parent_path().filename();
    if (e.path().extension() != ".yaml" || dir == "models" || dir == "validation") continue;
    const auto r = test::cli({"run", e.path().string(), "--json", test::temp_path("s.json")});
    EXPECT_EQ(r.code, 0) << e.path() << ": " << r.err;
    ++count;
  }
  EXPECT_GE(count, 4);
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

using nlohmann::json;

TEST(Cli, MemoryCsvPeaksMatchTheReport) {
  // The memory timeline replays the same changes as the engine: its largest total per
  // device is the report's peak, and every device starts at its static memory.
  const std::string m = test::temp_path("mem.csv"), j = test::temp_path("mem.json");
  const auto r =
      test::cli({"run", std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/zero-bubble.yaml",
                 "--memory-csv", m, "--json", j});
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<std::string, int64_t> peak;
  std::istringstream in(test::read_file(m));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "time_s,device,op,weights,gradients,optimizer,activations,stashed_weights,other,total");
  while (std::getline(in, line)) {
    const auto first = line.find(','), second = line.find(',', first + 1);
    const std::string device = line.substr(first + 1, second - first - 1);
    const int64_t total = std::stoll(line.substr(line.rfind(',') + 1));
    peak[device] = std::max(peak[device], total);
  }
  const json report = json::parse(test::read_file(j));
  for (const auto& d : report["devices"])
    EXPECT_EQ(peak[d["name"].get<std::string>()], d["peak_memory_bytes"].get<int64_t>());
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

// The report of `run ARGS --reproducible`, without the overrides it echoes.
nlohmann::json reproducible_report(std::vector<std::string> args) {
  const std::string j = test::temp_path("resolved-report.json");
  args.insert(args.end(), {"--reproducible", "--json", j});
  const auto r = test::cli(args);
  EXPECT_EQ(r.code, 0) << r.err;
  nlohmann::json report = nlohmann::json::parse(test::read_file(j));
  report.erase("overrides");
  return report;
}

TEST(Cli, ResolvedScenarioRerunsToTheSameReport) {
  // --resolved writes the scenario as simulated; run again, it gives the same report
  // (the overrides are applied in it, so the re-run echoes none).
  const std::string examples = std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/";
  const std::vector<std::vector<std::string>> runs = {
      {"run", "--set", "strategy={schedule: dapple, pipeline: 8}", "--set", "strategy.data=2"},
      {"run"},
      {"run", examples + "dapple-hybrid.yaml"},
      {"run", examples + "profile-csv.yaml"},  // names a profile relative to itself
      {"run", examples + "gpt-generated.yaml", "--set", "strategy.placement=scatter-first"},
      {"run", examples + "pipedream-async.yaml"},
      {"run", examples + "llama3-8b-h100.yaml"},  // a zoo preset, rail NICs, ZeRO-1
  };
  const std::string resolved = test::temp_path("resolved.yaml");
  for (auto args : runs) {
    const nlohmann::json first = reproducible_report([&] {
      auto a = args;
      a.insert(a.end(), {"--resolved", resolved});
      return a;
    }());
    const std::string text = test::read_file(resolved);
    // Shorthands expanded: explicit stages and device lists, no pipeline: N.
    EXPECT_EQ(text.find("pipeline:", text.find('\n')), std::string::npos)
        << text;  // after the comment
    EXPECT_NE(text.find("stages:"), std::string::npos) << text;
    EXPECT_NE(text.find("[node0/gpu0"), std::string::npos) << text;  // device lists
    EXPECT_EQ(reproducible_report({"run", resolved}), first) << args[1];
  }
}

// Two single-GPU stages of one 1 ms / 2 ms layer each; global_batch 4, micro_batch 1.
std::string two_stage_scenario() {
  return test::write_temp("two-stage.yaml", R"(name: tiny
cluster:
  gpu: {name: g, memory: 16 GiB, peak: 100 TFLOPS, hbm_bandwidth: 900 GB/s}
  nodes: 1
  gpus_per_node: 4
  intra_node: {kind: pcie, bandwidth: 1 GB/s, latency: 1 ms}
model:
  name: toy
  layers:
    - {name: a, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MB, params: 1M}
    - {name: b, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MB, params: 1M}
training: {global_batch: 4, micro_batch: 1, precision: fp32, optimizer: sgd}
strategy:
  schedule: gpipe
  stages: [{layers: 0}, {layers: 1}]
)");
}

// --set is repeatable on every command that reads a scenario. The two overrides give
// M = 12 / 2 = 6 micro-batches of 2 samples.
TEST(Cli, SetIsRepeatableOnEveryCommand) {
  const std::string f = two_stage_scenario();
  const std::vector<std::string> sets{"--set", "training.global_batch=12", "--set",
                                      "training.micro_batch=2"};
  auto with_sets = [&](std::vector<std::string> args) {
    args.insert(args.end(), sets.begin(), sets.end());
    return test::cli(args);
  };
  auto r = with_sets({"order", f});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("B5"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("F6"), std::string::npos) << r.out;
  r = with_sets({"model", f});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("per micro-batch of 2"), std::string::npos) << r.out;
  r = with_sets({"plan", f, "--top", "1", "--quiet"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = with_sets({"run", f});
  EXPECT_EQ(r.code, 0) << r.err;
  r = with_sets({"profile", f, "--backend", "host", "--repeats", "1", "--out",
                 test::temp_path("set-profile.csv")});
  EXPECT_EQ(r.code, 0) << r.err;
  r = with_sets({"validate", f, "--backend", "host", "--iterations", "1", "--warmup", "0", "--json",
                 test::temp_path("set-validate.json")});
  EXPECT_EQ(r.code, 0) << r.err;
}

// `profile --out F` writes CSV whatever F's name, and `model: {profile: F}` reads the
// format from the content: CSV under .yaml, .txt or no extension, and a YAML model under
// .txt. The profile's two layers come back as the model's two layers.
TEST(Cli, ProfileRoundTripWhateverTheExtension) {
  const std::string f = two_stage_scenario();
  auto scenario_reading = [](const std::string& profile) {
    return test::write_temp("reads-profile.yaml",
                            "cluster: {gpu: {name: g, memory: 16 GiB, peak: 100 TFLOPS, "
                            "hbm_bandwidth: 900 GB/s}, nodes: 1, gpus_per_node: 2, "
                            "intra_node: nvlink}\n"
                            "model: {profile: " +
                                profile +
                                "}\n"
                                "training: {global_batch: 4, micro_batch: 1}\n"
                                "strategy: {schedule: gpipe, pipeline: 2}\n");
  };
  for (const char* name : {"prof.yaml", "prof.txt", "prof"}) {
    const std::string out = test::temp_path(name);
    auto r = test::cli({"profile", f, "--backend", "host", "--repeats", "1", "--out", out});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(test::read_file(out).starts_with("name,")) << name;
    r = test::cli({"model", scenario_reading(out)});
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find("2 layers"), std::string::npos) << r.out;
  }
  const std::string yaml_txt = test::write_temp(
      "model.txt", "layers:\n  - {forward: 1 ms, backward: 2 ms, activation: 1 MiB, repeat: 2}\n");
  const auto r = test::cli({"model", scenario_reading(yaml_txt)});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 layers"), std::string::npos) << r.out;
}

// Every report echoes the --set overrides it applied (SPEC section 5): plan and validate
// JSON as the run report does (with the version), and the run summary in one line.
TEST(Cli, ReportsEchoTheOverrides) {
  const std::string f = two_stage_scenario();
  const json expected = {{"training.global_batch", "8"}, {"name", "echoed"}};
  const std::vector<std::string> sets{"--set", "training.global_batch=8", "--set", "name=echoed"};
  auto with_sets = [&](std::vector<std::string> args) {
    args.insert(args.end(), sets.begin(), sets.end());
    return test::cli(args);
  };
  auto r = with_sets({"plan", f, "--top", "1", "--quiet", "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["overrides"], expected);
  EXPECT_TRUE(j["version"].is_string());
  r = with_sets(
      {"validate", f, "--backend", "host", "--iterations", "1", "--warmup", "0", "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["overrides"], expected);
  EXPECT_TRUE(j["version"].is_string());
  r = with_sets({"run", f});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\noverrides   training.global_batch=8, name=echoed\n"), std::string::npos)
      << r.out;
  // Without overrides, no line.
  r = test::cli({"run", f});
  EXPECT_EQ(r.out.find("overrides"), std::string::npos) << r.out;
}

// Warnings a Megatron user wants (stderr and the report's warnings): GPUs the strategy
// leaves idle, a tensor group whose collectives cross the network.
TEST(Cli, WarnsOfIdleGpusAndTensorGroupsAcrossNodes) {
  const auto run = [](const std::string& cluster, const std::string& strategy) {
    return test::cli(
        {"run", "--json", "-",
         test::write_temp("warn.yaml",
                          "cluster: {gpu: a100-80gb, " + cluster +
                              "}\nmodel: {generator: transformer, layers: 2, hidden: 256, "
                              "heads: 4, sequence: 128, vocab: 1000}\n"
                              "training: {global_batch: 4, micro_batch: 1, precision: mixed}\n"
                              "strategy: {schedule: dapple, pipeline: 1, " + strategy + "}\n")});
  };
  const auto idle = run("nodes: 1, gpus_per_node: 8", "data: 4");
  EXPECT_EQ(idle.code, 0) << idle.err;
  EXPECT_NE(idle.err.find("pipesim: warning: the strategy uses 4 of the cluster's 8 GPUs"),
            std::string::npos)
      << idle.err;
  EXPECT_EQ(json::parse(idle.out)["warnings"].size(), 1u);
  const auto across = run("nodes: 2, gpus_per_node: 2, inter_node: ib-hdr", "tensor: 4");
  EXPECT_NE(across.err.find("strategy.tensor: a tensor group of 4 GPUs spans nodes"),
            std::string::npos)
      << across.err;
  const auto fine = run("nodes: 2, gpus_per_node: 2, inter_node: ib-hdr", "tensor: 2, data: 2");
  EXPECT_TRUE(json::parse(fine.out)["warnings"].empty()) << fine.err;
}

// Out of memory: one error line naming what is allowed, first (the run's warnings, here
// the toy's idle GPUs, follow it). The two-stage toy's static memory
// is 1M params x (4 + 4) B = 7.63 MiB per GPU, over a 2 MiB GPU. A bad output path is
// found before simulating: the same run with --json in a missing directory exits 2 on the
// path alone, without an out-of-memory line.
TEST(Cli, OutOfMemoryLineAndOutputPathsCheckedFirst) {
  const std::string f = two_stage_scenario();
  auto r = test::cli({"run", f, "--set", "cluster.gpu.memory=2 MiB"});
  EXPECT_EQ(r.code, 1);
  const std::string first = r.err.substr(0, r.err.find('\n') + 1);
  EXPECT_EQ(r.err.find("pipesim: error"), r.err.rfind("pipesim: error")) << r.err;
  EXPECT_TRUE(first.starts_with("pipesim: error: out of memory: node0/gpu0 needs 7.63 MiB"))
      << r.err;
  EXPECT_TRUE(first.ends_with("(at most 2.00 MiB on node0/gpu0)\n")) << r.err;
  EXPECT_NE(r.out.find("oom         YES"), std::string::npos) << r.out;
  for (const std::string command : {"run", "plan"}) {
    r = test::cli(
        {command, f, "--set", "cluster.gpu.memory=2 MiB", "--json", "/nonexistent-dir/x.json"});
    EXPECT_EQ(r.code, 2) << command;
    EXPECT_EQ(r.err,
              "pipesim: error: /nonexistent-dir/x.json: cannot create the output file: No such "
              "file or directory (a writable path)\n")
        << command;
  }
}

// A key that only a --set brought in is the option's error, not the file's; an unknown
// command is named, with the list of commands.
TEST(Cli, ErrorsNameTheirSource) {
  const std::string f = two_stage_scenario();
  auto r = test::cli({"run", f, "--set", "foo.bar=1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "pipesim: error: --set: foo: unknown key (keys here: name, cluster, model, training, "
            "strategy)\n");
  // A file key whose value is wrong stays the file's.
  r = test::cli({"run", f, "--set", "training.micro_batch=3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.starts_with("pipesim: error: " + f + ":")) << r.err;
  r = test::cli({"bogus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "pipesim: error: unknown command 'bogus' (commands: run, order, model, plan, sweep, "
            "profile, validate, man, completion)\n");
}

// The GPU count counts tensor ranks: data 2 x (1 + 1 replicas) x tensor 2 = 8 > 4 GPUs.
TEST(Cli, TooFewGpusCountsTensorRanks) {
  const std::string f = test::write_temp(
      "tp-gpus.yaml",
      "cluster: {gpu: {name: g, memory: 80 GiB, peak: 100 TFLOPS, hbm_bandwidth: 2000 GB/s}, "
      "nodes: 1, gpus_per_node: 4, intra_node: nvlink}\n"
      "model: {generator: transformer, layers: 4, hidden: 512, heads: 8, sequence: 256, "
      "vocab: 1000}\n"
      "training: {global_batch: 8, micro_batch: 2, precision: mixed}\n"
      "strategy: {schedule: dapple, pipeline: 2, tensor: 2, data: 2}\n");
  const auto r = test::cli({"run", f});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("needs 8 GPUs but the cluster has 4 (data x sum of stage replicas x "
                       "tensor <= number of GPUs)"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

TEST(Cli, ReportGivesParallelismDegreesAndWarnings) {
  // SPEC section 9: the layout as degrees. Llama 3 8B on 32 GPUs: TP 2 x PP 1 x DP 16.
  const nlohmann::json r = reproducible_report(
      {"run", std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/llama3-8b-h100.yaml"});
  EXPECT_EQ(r["parallelism"],
            (nlohmann::json{
                {"tensor", 2}, {"context", 1}, {"expert", 1}, {"pipeline", 1}, {"data", 16}}));
  EXPECT_TRUE(r["warnings"].is_array());
  // The default scenario: 2 stages of 2 replicas in 4 copies, DP 8 per stage.
  const nlohmann::json d = reproducible_report({"run"});
  EXPECT_EQ(d["parallelism"]["pipeline"], 2);
  EXPECT_EQ(d["parallelism"]["data"], 8);
}

// What-ifs that layers with given times cannot follow warn, per key (stderr and the
// report's warnings), and still run; a generated model follows each of them silently.
TEST(Cli, WhatIfsGivenTimesCannotFollowWarn) {
  const std::string toy = std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/toy-gpipe.yaml";
  const std::string gen =
      std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/gpt-generated.yaml";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"training.micro_batch=8", "training.micro_batch: 8 of 8 layers have fixed per-micro-batch"},
      {"cluster.gpu=a100-80gb", "cluster.gpu: 8 of 8 layers have given or measured times"},
      {"cluster.gpu.efficiency=0.1", "cluster.gpu.efficiency: 8 of 8 layers"},
      {"training.precision=mixed", "training.precision: 8 of 8 layers"},
      {"strategy.recompute=selective", "strategy.recompute: selective recomputation"},
  };
  for (const auto& [set, said] : cases) {
    const test::CliResult r = test::cli({"run", toy, "--set", set, "--json", "-"});
    EXPECT_EQ(r.code, 0) << set << ": " << r.err;
    EXPECT_NE(r.err.find("pipesim: warning: " + said), std::string::npos) << set << ": " << r.err;
    bool listed = false;
    const json report = json::parse(r.out);
    for (const auto& w : report["warnings"])
      listed |= w.get<std::string>().find(said) != std::string::npos;
    EXPECT_TRUE(listed) << set;
    // A generated model is priced from the key: no such warning.
    const test::CliResult g = test::cli({"run", gen, "--set", set});
    EXPECT_EQ(g.err.find("layers have"), std::string::npos) << set << ": " << g.err;
  }
  // Memory capacity does follow the GPU: no warning.
  EXPECT_EQ(test::cli({"run", toy, "--set", "cluster.gpu.memory=16 GiB"}).err.find("warning"),
            std::string::npos);
  // A sweep says it once, before the table, whatever the number of points.
  const test::CliResult sw = test::cli(
      {"sweep", toy, "--grid", "training.micro_batch=1,2,4", "--grid", "strategy.schedule=gpipe,dapple",
       "--quiet"});
  EXPECT_EQ(sw.code, 0) << sw.err;
  size_t count = 0;
  for (size_t at = sw.err.find("training.micro_batch: 8 of 8"); at != std::string::npos;
       at = sw.err.find("training.micro_batch: 8 of 8", at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << sw.err;
}

}  // namespace
}  // namespace pipesim
