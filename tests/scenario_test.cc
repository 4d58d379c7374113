// Scenario loading: every validation rule gives one line naming file, line, column, key,
// what is wrong and what is allowed, with exit code 2; overrides and expansions work.
#include <gtest/gtest.h>

#include "core/error.h"
#include "scenario/internal/reader.h"
#include "tests/support.h"

namespace pipesim {
namespace {

// Line numbers below refer to this text; columns are 1-based and point at the value
// (or at the key, for key errors).
const std::string kBase = R"(name: base
cluster:
  gpu: v100-16gb
  nodes: 2
  gpus_per_node: 2
  intra_node: nvlink
  inter_node: {kind: ethernet, bandwidth: 25 Gbit/s, latency: 10 us}
model:
  layers:
    - {name: a, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, params: 1M}
    - {name: b, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, params: 1M, repeat: 3}
training:
  global_batch: 8
  micro_batch: 2
strategy:
  schedule: dapple
  stages:
    - {layers: 0-1}
    - {layers: 2-3}
)";

std::string edit(std::string text, const std::string& find, const std::string& replace) {
  const auto pos = text.find(find);
  EXPECT_NE(pos, std::string::npos) << find;
  if (pos != std::string::npos) text.replace(pos, find.size(), replace);
  return text;
}

struct Rule {
  const char* name;
  std::string yaml;
  std::string expected;  // a fragment of the error line (after "pipesim: error: ")
};

void PrintTo(const Rule& r, std::ostream* os) {
  *os << r.name;
}

class ValidationRule : public ::testing::TestWithParam<Rule> {};

TEST_P(ValidationRule, OneLineMessageAndExitCode2) {
  const Rule& rule = GetParam();
  const std::string path = test::write_temp(std::string(rule.name) + ".yaml", rule.yaml);
  const auto r = test::cli({"run", path});
  EXPECT_EQ(r.code, 2) << r.err;
  ASSERT_TRUE(r.err.starts_with("pipesim: error: " + path + ":")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const std::string line = r.err.substr(std::string("pipesim: error: ").size() + path.size());
  EXPECT_NE(line.find(rule.expected), std::string::npos)
      << "got: " << line << "\nwant: " << rule.expected;
  EXPECT_TRUE(r.out.empty());
}

const std::string kExplicit = R"(cluster:
  gpu: a100-80gb
  devices: [{name: g0}, {name: g1}]
  switches: [{name: sw}]
  links:
    - {between: [g0, sw], kind: pcie}
    - {between: [g1, sw], kind: pcie, bandwidth: 16 GB/s}
model:
  layers: [{forward: 1 ms, backward: 2 ms}, {forward: 1 ms, backward: 2 ms}]
training: {global_batch: 4, micro_batch: 1}
strategy: {schedule: gpipe, pipeline: 2}
)";

const Rule kRules[] = {
    {"unknown_top_key", edit(kBase, "name: base", "nmae: base"),
     ":1:1: nmae: unknown key; did you mean 'name'? (keys here: name, cluster, model, training, "
     "strategy)"},
    {"unknown_nested_key", edit(kBase, "micro_batch: 2", "micro_bach: 2"),
     ":14:3: training.micro_bach: unknown key; did you mean 'micro_batch'?"},
    {"unknown_key_no_hint", edit(kBase, "micro_batch: 2", "micro_batch: 2\n  colour: red"),
     ":15:3: training.colour: unknown key (keys here: global_batch, micro_batch, precision, "
     "gradients, fp8_params, optimizer, optimizer_state, master_weights, iterations, "
     "optimizer_step, failures)"},
    {"missing_section", edit(kBase, "training:\n  global_batch: 8\n  micro_batch: 2\n", ""),
     ":1:1: training: missing required key"},
    {"bare_number", edit(kBase, "{name: a, forward: 1 ms", "{name: a, forward: 1"),
     ":10:26: model.layers.0.forward: '1' has no unit (e.g. '1.5 ms'; units: ps, ns, us, ms, s)"},
    {"unknown_unit",
     edit(kBase, "forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, params: 1M}",
          "forward: 1 ms, backward: 2 mins, activation: 1 MiB, output: 1 MiB, params: 1M}"),
     "model.layers.0.backward: unknown unit 'mins' in '2 mins' (units: ps, ns, us, ms, s)"},
    {"negative", edit(kBase, "activation: 1 MiB", "activation: -1 MiB"),
     "model.layers.0.activation: '-1 MiB' is negative"},
    {"bad_bandwidth_unit", edit(kBase, "25 Gbit/s", "25 Gbit"),
     "cluster.inter_node.bandwidth: unknown unit 'Gbit'"},
    {"gpu_preset", edit(kBase, "gpu: v100-16gb", "gpu: v100-16g"),
     ":3:8: cluster.gpu: unknown GPU preset 'v100-16g'; did you mean 'v100-16gb'?"},
    {"gpu_mapping_memory", edit(kBase, "gpu: v100-16gb", "gpu: {peak: 100 TFLOPS}"),
     "cluster.gpu.memory: missing required key"},
    {"intra_kind", edit(kBase, "intra_node: nvlink", "intra_node: eth25"),
     ":6:15: cluster.intra_node: link kind 'ethernet' is not allowed here (kinds: nvlink | "
     "nvswitch | pcie)"},
    {"link_kind_unknown", edit(kBase, "kind: ethernet", "kind: ethernt"),
     "cluster.inter_node.kind: unknown link kind 'ethernt'; did you mean 'ethernet'?"},
    {"inter_missing",
     edit(kBase, "  inter_node: {kind: ethernet, bandwidth: 25 Gbit/s, latency: 10 us}\n", ""),
     "cluster.inter_node: missing required key (the cluster has several nodes)"},
    {"shorthand_and_devices", edit(kBase, "  nodes: 2\n", "  nodes: 2\n  devices: [{name: g0}]\n"),
     ":4:10: cluster.nodes: cannot be combined with cluster.devices"},
    {"link_endpoint", edit(kExplicit, "[g1, sw]", "[g2, sw]"),
     ":7:18: cluster.links.1.between.0: no device or switch named 'g2'"},
    {"duplicate_device", edit(kExplicit, "{name: g1}", "{name: g0}"),
     "cluster.devices.1.name: name 'g0' is used twice"},
    {"disconnected",
     edit(kExplicit, "    - {between: [g1, sw], kind: pcie, bandwidth: 16 GB/s}\n", ""),
     "cluster: device 'g1' cannot reach device 'g0' (links that connect every GPU)"},
    {"link_without_kind", edit(kExplicit, "[g0, sw], kind: pcie}", "[g0, sw]}"),
     "cluster.links.0.kind: missing required key"},
    {"empty_layers",
     edit(edit(kBase,
               "    - {name: a, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, "
               "params: 1M}\n",
               ""),
          "    - {name: b, forward: 1 ms, backward: 2 ms, activation: 1 MiB, output: 1 MiB, "
          "params: 1M, repeat: 3}\n",
          "    []\n"),
     "model.layers: expected a non-empty list of layers"},
    {"both_backwards",
     edit(kBase, "{name: a, forward: 1 ms,", "{name: a, forward: 1 ms, backward_input: 1 ms,"),
     "model.layers.0.backward: give backward or backward_input + backward_weight, not both"},
    {"missing_backward",
     edit(kBase, "{name: a, forward: 1 ms, backward: 2 ms,", "{name: a, forward: 1 ms,"),
     ":10:7: model.layers.0.backward: missing required key (backward, or backward_input + "
     "backward_weight)"},
    {"half_split_backward",
     edit(kBase, "{name: a, forward: 1 ms, backward: 2 ms,",
          "{name: a, forward: 1 ms, backward_input: 2 ms,"),
     "model.layers.0.backward_weight: missing required key"},
    {"repeat_zero", edit(kBase, "repeat: 3", "repeat: 0"),
     "model.layers.1.repeat: 0 is out of range (a whole number from 1 to 100000)"},
    {"params_fraction", edit(kBase, "params: 1M}", "params: 1.5}"),
     "model.layers.0.params: '1.5' is not a whole number"},
    {"batch_not_divisible", edit(kBase, "global_batch: 8", "global_batch: 9"),
     ":13:17: training.global_batch: global_batch 9 is not a multiple of micro_batch x data = 2 x "
     "1 = 2"},
    {"not_whole", edit(kBase, "micro_batch: 2", "micro_batch: 2.5"),
     ":14:16: training.micro_batch: '2.5' is not a whole number (a whole number from 1 to "
     "1099511627776)"},
    {"zero_batch", edit(kBase, "micro_batch: 2", "micro_batch: 0"),
     ":14:16: training.micro_batch: 0 is out of range (a whole number from 1 to 1099511627776)"},
    {"precision", edit(kBase, "micro_batch: 2", "micro_batch: 2\n  precision: fp16"),
     ":15:14: training.precision: unknown value 'fp16'; did you mean 'fp32'? (fp32 | mixed | bf16 "
     "| fp8 | nvfp4)"},
    {"optimizer", edit(kBase, "micro_batch: 2", "micro_batch: 2\n  optimizer: adamw"),
     "training.optimizer: unknown value 'adamw'; did you mean 'adam'? (sgd | momentum | adam)"},
    {"duplicate_key", edit(kBase, "micro_batch: 2", "micro_batch: 2\n  micro_batch: 4"),
     ":15:3: training.micro_batch: duplicate key"},
    {"stage_gap", edit(kBase, "layers: 2-3", "layers: 3-3"),
     ":19:16: strategy.stages.1.layers: starts at layer 3 but the previous stage ended at layer 1"},
    {"stage_short", edit(kBase, "layers: 2-3", "layers: 2-2"),
     "strategy.stages: the stages end at layer 2 but the model has layers 0-3"},
    {"stage_past_end", edit(kBase, "layers: 2-3", "layers: 2-9"),
     "strategy.stages.1.layers: range '2-9' goes past the last layer 3"},
    {"stage_backwards", edit(kBase, "layers: 2-3", "layers: 3-2"),
     "strategy.stages.1.layers: range '3-2' runs backwards"},
    {"stage_garbage", edit(kBase, "layers: 2-3", "layers: two"),
     "strategy.stages.1.layers: 'two' is not a layer range"},
    {"pipeline_too_deep",
     edit(kBase, "  stages:\n    - {layers: 0-1}\n    - {layers: 2-3}\n", "  pipeline: 9\n"),
     "strategy.pipeline: 9 stages but the model has 4 layers (at most one stage per layer)"},
    {"stages_and_pipeline", edit(kBase, "  stages:\n", "  pipeline: 2\n  stages:\n"),
     "strategy.stages: give stages or pipeline, not both"},
    {"replicas_exceed_samples", edit(kBase, "- {layers: 0-1}", "- {layers: 0-1, replicas: 3}"),
     "strategy.stages.0.replicas: 3 replicas cannot split a micro-batch of 2 samples (at most "
     "training.micro_batch = 2 replicas per stage)"},
    {"warmup_value", edit(kBase, "schedule: dapple", "schedule: dapple\n  warmup: deeper"),
     "strategy.warmup: "},
    {"warmup_schedule", edit(kBase, "schedule: dapple", "schedule: gpipe\n  warmup: deep"),
     "strategy.warmup: a warm-up depth is a 1F1B option; gpipe fixes its own"},
    {"too_many_gpus",
     edit(edit(kBase, "micro_batch: 2", "micro_batch: 4"), "- {layers: 0-1}",
          "- {layers: 0-1, replicas: 4}"),
     "strategy.placement: the strategy needs 5 GPUs but the cluster has 4"},
    {"schedule", edit(kBase, "schedule: dapple", "schedule: dapel"),
     ":16:13: strategy.schedule: unknown or unavailable schedule 'dapel'; did you mean 'dapple'? "
     "(gpipe, gpipe-recompute, dapple, 1f1b, pipedream-flush, pipedream, pipedream-2bw, "
     "interleaved, zb-h1, "
     "zb-h2, zb-1p, zb-2p, zb-v)"},
    {"virtual_stages", edit(kBase, "schedule: dapple", "schedule: dapple\n  virtual_stages: 2"),
     ":17:19: strategy.virtual_stages: 2 model chunks per device need an interleaved schedule (1, "
     "or schedule: "
     "interleaved)"},
    {"virtual_stages_range",
     edit(kBase, "schedule: dapple", "schedule: interleaved\n  virtual_stages: 0"),
     "strategy.virtual_stages: 0 is out of range (a whole number from 1 to 64)"},
    {"interleaved_stage_count",
     edit(edit(kBase, "schedule: dapple", "schedule: interleaved\n  virtual_stages: 2"),
          "- {layers: 2-3}", "- {layers: 2-2}\n    - {layers: 3-3}"),
     ":19:5: strategy.stages: 3 stages cannot be dealt to devices as 2 chunks each"},
    // 4 layers as 2 x 2 chunks; global_batch 6 / micro_batch 2 gives M = 3, not a multiple of 2.
    {"interleaved_m_multiple",
     edit(edit(edit(kBase, "schedule: dapple", "schedule: interleaved\n  virtual_stages: 2"),
               "  stages:\n    - {layers: 0-1}\n    - {layers: 2-3}\n", "  pipeline: 2\n"),
          "global_batch: 8", "global_batch: 6"),
     ":16:13: strategy.schedule: interleaved needs the micro-batches per iteration (M = 3) to be a "
     "multiple of the "
     "pipeline depth (2)"},
    {"zb_unsplit", edit(kBase, "schedule: dapple", "schedule: zb-h1"),
     ":16:13: strategy.schedule: zb-h1 needs every layer's backward split, but layer 0 ('a') gives "
     "only backward"},
    {"vertical_sync_not_pipedream",
     edit(kBase, "schedule: dapple", "schedule: dapple\n  vertical_sync: true"),
     "strategy.vertical_sync: vertical sync is a PipeDream option (schedule: pipedream)"},
    {"order_lines", edit(kBase, "schedule: dapple", "schedule: dapple\n  order: [F0 B0]"),
     "strategy.order: expected 2 lines, got 1"},
    {"order_token", edit(kBase, "schedule: dapple", "schedule: dapple\n  order: [F0 X1, F0 B0]"),
     "strategy.order.0: 'X' at column 4 is not a step"},
    {"order_missing",
     edit(kBase, "schedule: dapple",
          "schedule: dapple\n  order: ['F0 F1 F2 F3 B0 B1 B2', 'F0 B0']"),
     "strategy.order.0: B3 is missing (every forward and backward of the iteration)"},
    {"order_twice",
     edit(kBase, "schedule: dapple", "schedule: dapple\n  order: ['F0 F0', 'F0 B0']"),
     "strategy.order.0: F0 appears twice (each step once)"},
    {"order_range", edit(kBase, "schedule: dapple", "schedule: dapple\n  order: ['F9', 'F0 B0']"),
     "strategy.order.0: F9 is out of range (micro-batches 0-3)"},
    {"order_async", edit(kBase, "schedule: dapple", "schedule: pipedream\n  order: ['F0', 'F0']"),
     "strategy.order: hand-written orders are for synchronous schedules"},
    {"order_deadlock",
     edit(kBase, "schedule: dapple",
          "schedule: dapple\n  order: ['F0 F1 F2 F3 B0 B1 B2 B3', 'B0 F0 F1 B1 F2 B2 F3 B3']"),
     ":17:10: strategy.order: deadlock: dev1:B0 waits for dev1:F0 waits for dev1:B0"},
    {"placement_policy",
     edit(kBase, "schedule: dapple", "schedule: dapple\n  placement: fresh-frist"),
     "strategy.placement: unknown value 'fresh-frist'; did you mean 'fresh-first'?"},
    {"placement_count",
     edit(kBase, "schedule: dapple", "schedule: dapple\n  placement: [[node0/gpu0]]"),
     "strategy.placement: expected 2 device lists, got 1"},
    {"placement_twice",
     edit(kBase, "schedule: dapple", "schedule: dapple\n  placement: [[node0/gpu0], [node0/gpu0]]"),
     "strategy.placement.1.0: device 'node0/gpu0' is given two stages (each device at most once)"},
    {"placement_unknown_device",
     edit(kBase, "schedule: dapple", "schedule: dapple\n  placement: [[node0/gpu0], [gpu9]]"),
     "strategy.placement.1.0: no device 'gpu9' (a device name or an index 0-3)"},
    {"too_many_ops",
     edit(edit(kBase, "global_batch: 8", "global_batch: 80000000000"), "micro_batch: 2",
          "micro_batch: 1"),
     // M = 8e10 micro-batches: 2 stages x 3 ops (F, B, W) each, and one activation and one
     // gradient transfer between the stages per micro-batch.
     "strategy: this run would simulate about 6.4e+11 ops (4.8e+11 compute ops and 1.6e+11 "
     "transfers"},
    {"list_for_scalar", edit(kBase, "{name: a, forward: 1 ms", "{name: a, forward: [1 ms]"),
     "model.layers.0.forward: expected a single value, got a list"},
    {"intra_topology",
     edit(kBase, "intra_node: nvlink", "intra_node: {kind: nvlink, topology: torus}"),
     ":6:40: cluster.intra_node.topology: unknown value 'torus' (mesh | switch | hybrid-cube-mesh "
     "| tree)"},
    {"cube_mesh_size",
     edit(kBase, "intra_node: nvlink", "intra_node: {kind: nvlink, topology: hybrid-cube-mesh}"),
     "cluster: a hybrid cube-mesh joins 8 GPUs, not 2 (gpus_per_node: 8)"},
    {"oversubscription",
     edit(kBase, "  nodes: 2\n",
          "  nodes: 2\n  fabric: {nodes_per_leaf: 1, oversubscription: 0.5}\n"),
     "cluster.fabric.oversubscription: '0.5' is not a ratio >= 1 (a number >= 1, e.g. 2 for 2:1)"},
    {"allreduce_algo", edit(kBase, "schedule: dapple", "schedule: dapple\n  allreduce: butterfly"),
     "strategy.allreduce: unknown value 'butterfly' (ring | tree | hierarchical | auto)"},
    // Found by the loader fuzzer: 3e18 parameters x 4 bytes overflows 64 bits.
    {"too_large", edit(kBase, "params: 1M}", "params: 3000000000000000000}"),
     "is too large to simulate"},
    {"not_a_mapping", "- just\n- a list\n", ":1:1: a scenario must be a mapping, got a list"},
    {"invalid_yaml", edit(kBase, "model:\n", "model: [\n"), "invalid YAML"},
};

INSTANTIATE_TEST_SUITE_P(Rules, ValidationRule, ::testing::ValuesIn(kRules),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Loader, NestingTooDeepSaysSo) {
  // Once "invalid YAML: bad file".
  try {
    load_scenario_text("name: x\nmodel: " + std::string(3000, '[') + std::string(3000, ']'),
                       "deep.yaml");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find("deep.yaml:2:"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("the YAML is nested too deep"), std::string::npos) << e.message();
  }
}

TEST(Loader, ASecondYamlDocumentIsAnError) {
  // Once ignored: everything after the `---` on line 3 (and after a `...` end marker).
  for (const char* text : {"name: a\nmodel: {}\n---\nname: b\n",
                           "---\nname: a\n...\nname: b\n"}) {
    try {
      load_scenario_text(text, "two.yaml");
      FAIL() << "accepted two documents";
    } catch (const InputError& e) {
      EXPECT_NE(e.message().find("two.yaml:"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("a second YAML document"), std::string::npos) << e.message();
    }
  }
  // One document with its markers, comments after the end, `---` inside a value: fine.
  EXPECT_EQ(internal::second_document_line("---\nname: a\n...\n# done\n"), 0);
  EXPECT_EQ(internal::second_document_line("name: a\nnote: x---\n  --- indented\n"), 0);
  EXPECT_EQ(internal::second_document_line("name: a\n---\n"), 2);
  // yaml-cpp's LoadAll looped for ever on this input (found by fuzz_resolved).
  EXPECT_THROW(load_scenario_text("# c\n, activation: 64 MiC, output:# x\ntraining:\n  a: 1\n",
                                  "loop.yaml"),
               InputError);
}

TEST(Loader, BaseScenarioIsValidAndRepeatExpands) {
  const Scenario s = load_scenario_text(kBase, "base.yaml");
  ASSERT_EQ(s.model.layers.size(), 4u);
  EXPECT_EQ(s.model.layers[1].name, "b.0");
  EXPECT_EQ(s.model.layers[3].name, "b.2");
  EXPECT_EQ(s.model.layers[3].params, 1'000'000);
  EXPECT_EQ(s.micro_batches, 4);
  EXPECT_EQ(s.cluster.num_devices(), 4);
  EXPECT_EQ(s.name, "base");
}

TEST(Loader, ExplicitGraphTakesLinkDefaultsFromTheKind) {
  const Scenario s = load_scenario_text(kExplicit, "explicit.yaml");
  EXPECT_EQ(s.cluster.num_devices(), 2);
  EXPECT_EQ(s.name, "explicit");  // the file's stem when no name is given
  // g0-sw: the pcie preset (15.75 GB/s); g1-sw: 16 GB/s given. The route's bottleneck
  // is the slower one and its latency the pcie preset's 3 us on each link.
  const Route& r = s.cluster.route(0, 1);
  EXPECT_DOUBLE_EQ(r.bottleneck_bytes_per_s, 15.75e9);
  EXPECT_EQ(r.latency, Time::us(6));
}

TEST(Loader, OverridesApplyBeforeValidation) {
  const Scenario s =
      load_scenario_text(kBase, "base.yaml",
                         {{"cluster.intra_node.bandwidth", "100 GB/s"},  // preset becomes a mapping
                          {"strategy.stages.0.replicas", "2"},
                          {"training.iterations", "3"},
                          {"cluster.inter_node", "{kind: infiniband}"}});
  EXPECT_DOUBLE_EQ(s.cluster.route(0, 1).bottleneck_bytes_per_s, 100e9);
  EXPECT_EQ(s.cluster.route(0, 1).latency, Time::us(2));  // still the nvlink preset's latency
  EXPECT_EQ(s.strategy.stages[0].replicas, 2);
  EXPECT_EQ(s.training.iterations, 3);
  EXPECT_DOUBLE_EQ(s.cluster.route(0, 2).bottleneck_bytes_per_s, 25e9);  // HDR: 200 Gbit/s
}

TEST(Loader, TopologyAndFabricKeys) {
  const Scenario s = load_scenario_text(
      edit(edit(kBase, "intra_node: nvlink",
                "intra_node: {kind: pcie, topology: tree, gpus_per_switch: 1}"),
           "  nodes: 2\n",
           "  nodes: 2\n  fabric: {nodes_per_leaf: 1, oversubscription: 2, spine_latency: 1 us}\n"),
      "topo.yaml");
  // One GPU per PCIe switch: GPU0 -> GPU1 crosses switch, host bridge, switch (3 x 3 us,
  // the pcie3 preset's latency); across nodes the spine adds its 1 us.
  EXPECT_EQ(s.cluster.route(0, 1).latency, Time::us(9));
  EXPECT_EQ(s.cluster.route(0, 2).latency, Time::us(3 + 3 + 10 + 1 + 10 + 3 + 3));
}

TEST(Loader, OverrideErrorsNameTheOverride) {
  auto r =
      test::cli({"run", test::write_temp("ov.yaml", kBase), "--set", "training.micro_batch=x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "pipesim: error: --set: training.micro_batch: 'x' is not a whole number (a whole "
            "number from 1 to 1099511627776)\n");
  r = test::cli(
      {"run", test::write_temp("ov.yaml", kBase), "--set", "strategy.stages.5.replicas=2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "pipesim: error: --set: strategy.stages.5: no list item '5' (an index from 0 to 1)\n");
  r = test::cli({"run", "--set", "nonsense"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "pipesim: error: --set: 'nonsense' is not KEY=VALUE (e.g. --set "
            "cluster.inter_node.bandwidth=\"10 GB/s\")\n");
  r = test::cli({"run", "--set", "training.colour=red"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--set: training.colour: unknown key"), std::string::npos) << r.err;
}

TEST(Loader, MissingFile) {
  const auto r = test::cli({"run", "/nonexistent/x.yaml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "pipesim: error: /nonexistent/x.yaml: cannot read the scenario file: No such file or "
            "directory (a readable YAML file)\n");
}

}  // namespace
}  // namespace pipesim
