#include "tests/support.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "apps/cli.h"
#include "schedules/order.h"
#include "topology/presets.h"

namespace pipesim::test {

Training mixed(int64_t micro_batch) {
  Training t;
  t.micro_batch = micro_batch;
  t.precision = Precision::kMixed;
  return t;
}

GpuSpec round_gpu() {
  GpuSpec gpu;
  gpu.name = "round";
  gpu.memory_bytes = 80LL << 30;
  gpu.peak_flops = 100e12;
  gpu.fp8_flops = 200e12;
  gpu.fp4_flops = 400e12;
  gpu.vector_flops = 50e12;
  gpu.hbm_bytes_per_s = 1e12;
  return gpu;
}

int64_t total_params(const Model& m) {
  int64_t p = 0;
  for (const Layer& l : m.layers) p += l.params;
  return p;
}

std::string to_yaml(const PipeSpec& p) {
  auto at = [](const std::vector<double>& v, int s) {
    return v.size() == 1 ? v[0] : v.at(static_cast<size_t>(s));
  };
  const int layers_count = p.stages * p.virtual_stages;
  std::string layers;
  for (int s = 0; s < layers_count; ++s) {
    const std::string backward = p.tw_ms.empty()
                                     ? fmt::format("backward: {} ms", at(p.tb_ms, s))
                                     : fmt::format("backward_input: {} ms, backward_weight: {} ms",
                                                   at(p.tb_ms, s), at(p.tw_ms, s));
    const std::string weight =
        p.weight_activation.empty() ? "" : ", weight_activation: " + p.weight_activation;
    layers += fmt::format(
        "    - {{name: l{}, forward: {} ms, {}, activation: {}{}, output: {}, params: {}}}\n", s,
        at(p.tf_ms, s), backward, p.activation, weight, p.output, p.params);
  }
  int gpus = 0;
  std::string stages;
  if (p.replicas.empty()) {
    gpus = p.stages;
    stages = fmt::format("  pipeline: {}\n", p.stages);
  } else {
    stages = "  stages:\n";
    for (int s = 0; s < p.stages; ++s) {
      stages += fmt::format("    - {{layers: {}-{}, replicas: {}}}\n", s, s,
                            p.replicas.at(static_cast<size_t>(s)));
      gpus += p.replicas.at(static_cast<size_t>(s));
    }
  }
  gpus *= p.data;
  const int micro =
      p.replicas.empty() ? 1 : *std::max_element(p.replicas.begin(), p.replicas.end());
  return fmt::format(R"(name: test
cluster:
  gpu: {gpu}
  nodes: 1
  gpus_per_node: {gpus}
  intra_node: {{kind: nvlink, bandwidth: {bw}, latency: {lat}}}
model:
  layers:
{layers}training:
  global_batch: {batch}
  micro_batch: {micro}
  precision: {precision}
  optimizer: {optimizer}
  iterations: {iters}
strategy:
  schedule: {schedule}
  data: {data}
  virtual_stages: {v}
{stages}{extra})",
                     fmt::arg("gpu", p.gpu), fmt::arg("gpus", gpus), fmt::arg("bw", p.bandwidth),
                     fmt::arg("lat", p.latency), fmt::arg("layers", layers),
                     // Times are per micro-batch whatever its size; each replica needs a sample.
                     fmt::arg("batch", p.micro_batches * p.data * micro), fmt::arg("micro", micro),
                     fmt::arg("precision", p.precision), fmt::arg("optimizer", p.optimizer),
                     fmt::arg("iters", p.iterations), fmt::arg("schedule", p.schedule),
                     fmt::arg("data", p.data), fmt::arg("v", p.virtual_stages),
                     fmt::arg("stages", stages), fmt::arg("extra", p.strategy_extra));
}

SimRun run_yaml(const std::string& yaml, bool record_memory) {
  Scenario sc = load_scenario_text(yaml, "test.yaml");
  TaskGraph g = scenario_task_graph(sc);
  SimOptions o;
  o.record_memory = record_memory;
  Timeline tl = simulate(g, sc.cluster, o);
  RunInfo info = run_info(sc, 0.0);
  Report rep = make_report(g, sc.cluster, tl, info);
  return SimRun{std::move(sc), std::move(g), std::move(tl), std::move(rep)};
}

std::string moe_scenario(const std::string& strategy) {
  return R"(
cluster: {gpu: h100-80gb, nodes: 1, gpus_per_node: 4, intra_node: nvswitch3}
model: {generator: transformer, layers: 2, hidden: 256, heads: 4, sequence: 128, vocab: 1000,
        experts: 4, top_k: 2, expert_ffn: 512, mlp: swiglu, norm: rmsnorm, position: rotary}
training: {global_batch: 8, micro_batch: 1, precision: bf16, optimizer: adam}
strategy: {schedule: 1f1b, pipeline: 1, )" +
         strategy + "}\n";
}

std::string moe_error(const std::string& strategy) {
  try {
    run_yaml(moe_scenario(strategy));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

SimRun run_pipe(const PipeSpec& p) {
  return run_yaml(to_yaml(p), true);
}

Time device_finish(const SimRun& r, int device) {
  Time t;
  for (OpId id : r.graph.stream(device)) t = max(t, r.timeline.end[id]);
  return t;
}

int64_t peak_activation_bytes(const SimRun& r, int device) {
  int64_t cur = r.graph.static_memory(device)[static_cast<size_t>(MemCategory::kActivations)];
  int64_t peak = cur;
  for (const MemoryChange& c : r.timeline.memory_changes) {
    const Op& op = r.graph.op(c.op);
    if (op.device != device || op.mem_category != MemCategory::kActivations) continue;
    cur += c.at_end ? op.mem_at_end : op.mem_at_start;
    peak = std::max(peak, cur);
  }
  return peak;
}

LoweringInput two_copies_gpipe() {
  LoweringInput in;
  OrderSpec spec;
  spec.kind = ScheduleKind::kGpipe;
  spec.replicas = {1};
  in.orders = build_orders(spec);
  in.placement = std::make_shared<const Placement>(Placement{{{0}}, {{1}}});
  in.num_devices = 2;
  return in;
}

Cluster two_gpus(double bytes_per_s) {
  GpuSpec gpu = *find_gpu_preset("h100-80gb");
  gpu.comm_interference = 0;  // (times worked by hand: compute never slowed)
  return ClusterBuilder::shorthand(1, 2, gpu,
                                   {"custom", LinkKind::kNvLink, bytes_per_s, Time::zero()},
                                   {"custom", LinkKind::kInfiniBand, bytes_per_s, Time::zero()});
}

CliResult cli(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"pipesim"};
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

std::string temp_path(const std::string& name) {
  static const std::string dir = [] {
    std::string d =
        (std::filesystem::temp_directory_path() / fmt::format("pipesim-test-{}", getpid()))
            .string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir + "/" + name;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace pipesim::test
