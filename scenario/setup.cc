#include "scenario/setup.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <numeric>

#include "core/checked.h"
#include "core/error.h"
#include "scenario/device_speed.h"
#include "scenario/work_estimate.h"
#include "schedules/lower.h"
#include "sim/copies.h"

namespace pipesim {

namespace {
std::vector<int> position_replicas(const Scenario& s) {
  std::vector<int> r;
  for (int p = 0; p < s.strategy.positions(); ++p)
    r.push_back(s.strategy.stages[static_cast<size_t>(p)].replicas);
  return r;
}

// "TP t x PP p x DP d": tensor degree, pipeline depth (and chunks per device), and
// data-parallel ranks of a stage (replicas x copies); "a-b" where stages differ.
std::string layout(const Scenario& s) {
  const Strategy& st = s.strategy;
  int t_lo = INT32_MAX, t_hi = 0, d_lo = INT32_MAX, d_hi = 0;
  for (int p = 0; p < st.positions(); ++p) {
    const StageSpec& stage = st.stages[static_cast<size_t>(p)];
    t_lo = std::min(t_lo, st.tensor_of(stage));
    t_hi = std::max(t_hi, st.tensor_of(stage));
    d_lo = std::min(d_lo, stage.replicas * st.data);
    d_hi = std::max(d_hi, stage.replicas * st.data);
  }
  auto range = [](int lo, int hi) {
    return lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi);
  };
  return fmt::format(
      "TP {}{} x PP {}{} x DP {}{}", range(t_lo, t_hi),
      st.context > 1 ? fmt::format(" x CP {}", st.context) : "", st.positions(),
      st.virtual_stages > 1 ? fmt::format(" ({} chunks each)", st.virtual_stages) : "",
      range(d_lo, d_hi),
      st.expert > 1 || st.expert_tensor > 1
          ? fmt::format(" (EP {}{})", st.expert,
                        st.expert_tensor > 1 ? fmt::format(", ETP {}", st.expert_tensor) : "")
          : "");
}

// How many times its profile's time global stage g takes on its slowest GPU.
double slowest_pace(const Scenario& s, const DeviceSpeed& speed, int g) {
  if (speed.uniform()) return 1.0;
  double pace = 0;
  const auto p = static_cast<size_t>(s.strategy.position_of(g));
  for (const auto& copy : s.placement) {
    for (int d : copy[p]) pace = std::max(pace, speed.scale(d, g));
  }
  return pace > 0 ? pace : 1.0;
}

Time paced(Time t, double pace) {
  return checked_scale(t, pace, "a stage's time at its slowest GPU's pace");
}

bool split_backward(const Model& m) {
  return std::any_of(m.layers.begin(), m.layers.end(),
                     [](const Layer& l) { return l.split_backward; });
}
}  // namespace

std::vector<Recompute> recompute_modes(const Scenario& s) {
  std::vector<Recompute> out;
  for (const StageSpec& st : s.strategy.stages) out.push_back(s.strategy.recompute_of(st));
  return out;
}

std::vector<int> stage_tensor_degrees(const Scenario& s) {
  std::vector<int> out;
  for (const StageSpec& st : s.strategy.stages) out.push_back(s.strategy.tensor_of(st));
  return out;
}

std::vector<int> warmup_depths(const Scenario& s) {
  if (!has_warmup(s.strategy.schedule) || !s.user_order.empty()) return {};
  const int S = s.strategy.positions();
  const auto M = static_cast<int>(s.micro_batches);
  const std::vector<StageProfile> prof = stage_profiles(s.model, s.strategy.stages);
  const auto& copy = s.placement.front();
  const DeviceSpeed speed(s);
  // The steady-state cycle: every stage runs one F and one B per bottleneck period.
  Time cycle;
  for (int st = 0; st < S; ++st) {
    const StageProfile& p = prof[static_cast<size_t>(st)];
    // Its GPU's launch overhead, once for F and once for B (W runs inside B's call here).
    const Time launch = s.cluster.device(copy[static_cast<size_t>(st)][0]).gpu.launch_overhead;
    cycle = max(
        cycle, paced(p.forward + p.backward_input + p.backward_weight, slowest_pace(s, speed, st)) /
                       s.strategy.stages[static_cast<size_t>(st)].replicas +
                   launch * 2);
  }
  // Idle-route time of stage h's output to stage h + 1 and of its gradient coming back,
  // each replica pair moving its share (the bytes split over the larger replica count).
  std::vector<Time> hops;
  std::vector<Warmup> modes;
  for (int h = 0; h < S; ++h) {
    modes.push_back(s.strategy.stages[static_cast<size_t>(h)].warmup.value_or(s.strategy.warmup));
    if (h + 1 == S) break;
    const auto& from = copy[static_cast<size_t>(h)];
    const auto& to = copy[static_cast<size_t>(h) + 1];
    const int64_t bytes = prof[static_cast<size_t>(h)].output_bytes /
                          static_cast<int64_t>(std::max(from.size(), to.size()));
    hops.push_back(checked_add(Cluster::transfer_time(s.cluster.route(from[0], to[0]), bytes),
                               Cluster::transfer_time(s.cluster.route(to[0], from[0]), bytes),
                               "a warm-up estimate"));
  }
  return warmup_depths(modes, cycle, hops, M);
}

GroupDegrees group_degrees(const Scenario& s) {
  const Strategy& st = s.strategy;
  return {.context = st.context,
          .expert = st.expert,
          .expert_tensor = st.expert_tensor,
          .context_comm = st.context_comm,
          .routing_imbalance = st.routing_imbalance,
          .dedup_dispatch = st.dedup_dispatch,
          .shared_expert_overlap = st.shared_expert_overlap,
          .tensor_pieces = st.tensor_overlap == TensorOverlap::kFull,
          .micro_batch = s.training.micro_batch,
          .round_robin = replicas_take_turns(st.schedule)};
}

ActivationScope activation_scope(const Scenario& s) {
  const Strategy& st = s.strategy;
  ActivationScope out{st.recompute_modules, st.recompute_layers, st.offload_layers, 0.0};
  // (The slowest host link of the cluster: a stage's copies wait for its slowest rank.)
  bool first = true;
  for (const Device& d : s.cluster.devices()) {
    if (first || d.gpu.host_bytes_per_s < out.host_bytes_per_s)
      out.host_bytes_per_s = d.gpu.host_bytes_per_s;
    first = false;
  }
  return out;
}

StageCosts stage_costs(const Scenario& s) {
  const Strategy& st = s.strategy;
  const std::vector<StageProfile> prof =
      stage_profiles(s.model, st.stages, recompute_modes(s), stage_tensor_degrees(s),
                     st.sequence_parallel, group_degrees(s), activation_scope(s));
  const auto& copy = s.placement.front();
  const DeviceSpeed speed(s);
  StageCosts c;
  for (size_t g = 0; g < prof.size(); ++g) {
    const StageProfile& p = prof[g];
    // At the pace of the stage's slowest GPU (mixed GPUs, stragglers).
    const double pace = slowest_pace(s, speed, static_cast<int>(g));
    // One GPU's share: replicas split the micro-batch, tensor ranks the FLOPs; a recompute
    // runs just before the backward, so the schedule sees it as part of B.
    const int work = st.stages[g].replicas * st.tensor_of(st.stages[g]) * st.context;
    const bool recompute = st.recompute_of(st.stages[g]) != Recompute::kNone;
    // Each step also pays its GPU's launch overhead (R its own, before B).
    const auto& at = copy[static_cast<size_t>(st.position_of(static_cast<int>(g)))];
    const Time launch = s.cluster.device(at[0]).gpu.launch_overhead;
    c.forward.push_back(paced(p.forward, pace) / work + launch);
    c.backward.push_back(
        paced(p.backward_input + (recompute ? p.recompute_time : Time::zero()), pace) / work +
        launch * (recompute ? 2 : 1));
    c.weight.push_back(paced(p.backward_weight, pace) / work + launch);
    // Activations as the memory tracker counts them (gpu_activation): what F leaves
    // allocated, and of that what W still reads once B is done.
    const GpuActivation a =
        gpu_activation(p, st.stages[g].replicas, st.tensor_of(st.stages[g]), st.sequence_parallel,
                       recompute, s.training.micro_batch, st.context);
    c.activation.push_back(a.held);
    c.weight_activation.push_back(a.weight);
    if (g + 1 == prof.size()) break;
    // Idle-route time of the output to the next stage and of its gradient back, each lane
    // pair moving its share.
    const auto& from = copy[static_cast<size_t>(st.position_of(static_cast<int>(g)))];
    const auto& to = copy[static_cast<size_t>(st.position_of(static_cast<int>(g) + 1))];
    const int64_t bytes =
        p.output_bytes / static_cast<int64_t>(std::max(from.size(), to.size())) / st.context;
    const bool local = from[0] == to[0];
    c.send.push_back(local ? Time::zero()
                           : Cluster::transfer_time(s.cluster.route(from[0], to[0]), bytes));
    c.gradient.push_back(local ? Time::zero()
                               : Cluster::transfer_time(s.cluster.route(to[0], from[0]), bytes));
  }
  return c;
}

SlotOrders scenario_orders(const Scenario& s) {
  OrderSpec spec;
  spec.kind = s.strategy.schedule;
  spec.positions = s.strategy.positions();
  spec.virtual_stages = s.strategy.virtual_stages;
  spec.micro_batches = static_cast<int>(s.micro_batches);
  spec.iterations = s.training.iterations;
  spec.split_backward = split_backward(s.model);
  spec.replicas = position_replicas(s);
  spec.in_flight = warmup_depths(s);
  for (const Recompute r : recompute_modes(s)) spec.recompute.push_back(r != Recompute::kNone);
  spec.user = s.user_order.empty() ? nullptr : &s.user_order;
  StageCosts costs;
  if (needs_stage_costs(s.strategy.schedule) && spec.user == nullptr) {
    costs = stage_costs(s);
    spec.costs = &costs;
  }
  return build_orders(spec);
}

std::vector<std::string> scenario_warnings(const Scenario& s) {
  std::vector<std::string> out = s.input_warnings;
  for (std::string& w : recompute_warnings(s)) out.push_back(std::move(w));
  // Analytic layers on a GPU without curves of any generation run at a flat 0.5 of its
  // peaks: say so (SPEC: nothing silent), once per such GPU.
  const bool analytic = std::any_of(s.model.layers.begin(), s.model.layers.end(),
                                    [](const Layer& l) { return l.source == "analytic"; });
  std::vector<std::string> flat;
  for (int d = 0; analytic && d < s.cluster.num_devices(); ++d) {
    const GpuSpec& g = s.cluster.device(d).gpu;
    if (g.curves.starts_with("a flat 0.5") && !g.efficiency &&
        std::find(flat.begin(), flat.end(), g.name) == flat.end()) {
      flat.push_back(g.name);
      out.push_back(fmt::format(
          "cluster.gpu: '{}' has no efficiency curves: its ops run at a flat 0.5 of its peaks "
          "(add like: PRESET for a generation's curves, or efficiency: SHARE)",
          g.name));
    }
  }
  // A power limit slows the GPU's compute, which layers with given or measured times do not
  // follow (on one kind of GPU: with several, they follow the ratio of the clocked peaks).
  const auto given = std::count_if(s.model.layers.begin(), s.model.layers.end(),
                                   [](const Layer& l) { return l.source.starts_with("profile"); });
  if (s.kind_layer_time.empty() && given > 0 && s.cluster.num_devices() > 0 &&
      s.cluster.device(0).gpu.clock_share() < 1)
    out.push_back(fmt::format(
        "power_limit: {} of {} layers have given or measured times, which do not change with "
        "the GPU's clock{}",
        given, s.model.layers.size(),
        static_cast<size_t>(given) < s.model.layers.size() ? "; the other layers slow down" : ""));
  // Mixed GPUs: layers with given or measured times cannot be priced on the other GPUs;
  // they follow the ratio of the peaks (scenario.cc, price_gpu_kinds).
  const auto fixed = std::count_if(s.model.layers.begin(), s.model.layers.end(),
                                   [](const Layer& l) { return l.source != "analytic"; });
  if (!s.kind_layer_time.empty() && fixed > 0)
    out.push_back(fmt::format(
        "cluster: the GPUs differ, and {} layer{} with given or measured times run on the "
        "others at the ratio of their peaks to device 0's (an assumption; analytic layers are "
        "priced on each GPU)",
        fixed, fixed == 1 ? "" : "s"));
  return out;
}

namespace {

// What the user should hear of that is neither an error nor in the numbers (SPEC
// section 9): the scenario's own (scenario_warnings), GPUs the strategy leaves idle, a
// tensor group spanning nodes, a weight-gather overlap with nothing to gather.
std::vector<std::string> run_warnings(const Scenario& s, int gpus, bool zero_applies) {
  std::vector<std::string> out = scenario_warnings(s);
  // What a Megatron user would want to hear of: GPUs the strategy leaves idle, and a
  // tensor group whose every-layer collectives cross the network.
  if (gpus < s.cluster.num_devices())
    out.push_back(
        fmt::format("the strategy uses {} of the cluster's {} GPUs; the other {} stay idle", gpus,
                    s.cluster.num_devices(), s.cluster.num_devices() - gpus));
  bool split_group = false;
  for (int p = 0; p < s.strategy.positions() && !split_group; ++p) {
    const auto t =
        static_cast<size_t>(s.strategy.tensor_of(s.strategy.stages[static_cast<size_t>(p)]));
    for (const auto& copy : s.placement) {
      const auto& lanes = copy[static_cast<size_t>(p)];
      for (size_t j = 0; j < lanes.size() && !split_group; j += t) {
        for (size_t k = j + 1; k < j + t && k < lanes.size(); ++k) {
          if (s.cluster.device(lanes[k]).node != s.cluster.device(lanes[j]).node) {
            split_group = true;
            out.push_back(fmt::format(
                "strategy.tensor: a tensor group of {} GPUs spans nodes ({} and {}): its "
                "collectives, several per layer, cross the network",
                t, s.cluster.device(lanes[j]).name, s.cluster.device(lanes[k]).name));
            break;
          }
        }
      }
    }
  }
  // Tensor overlap with no tensor group to overlap.
  if (s.strategy.tensor_overlap != TensorOverlap::kNone &&
      std::all_of(s.strategy.stages.begin(), s.strategy.stages.end(),
                  [&](const StageSpec& g) { return s.strategy.tensor_of(g) == 1; }))
    out.push_back("strategy.tensor_overlap: no effect: no stage has tensor-parallel ranks");
  // Context and expert settings with nothing to act on.
  if (s.strategy.context == 1 && s.strategy.context_comm != ContextComm::kP2p)
    out.push_back("strategy.context_comm: no effect: strategy.context is 1");
  if (s.strategy.expert == 1 && s.strategy.dedup_dispatch)
    out.push_back("strategy.expert_dispatch: no effect: strategy.expert is 1 (no token exchange)");
  if (s.strategy.shared_expert_overlap) {
    const bool shared = std::any_of(s.model.layers.begin(), s.model.layers.end(), [](const Layer& l) {
      return l.moe && std::any_of(l.pieces.begin(), l.pieces.end(), [](const LayerPiece& p) {
               return p.kind == PieceKind::kSharedExperts;
             });
    });
    if (s.strategy.expert == 1)
      out.push_back(
          "strategy.shared_expert_overlap: no effect: strategy.expert is 1 (no token exchange)");
    else if (!shared)
      out.push_back(
          "strategy.shared_expert_overlap: no effect: the model's MoE layers have no shared "
          "experts");
  }
  if (s.strategy.overlap_param_gather && !zero_applies)
    out.push_back(
        "strategy.overlap_param_gather: no effect: no data-parallel ranks to gather weights from");
  // (Gradients are reduced over data-parallel ranks with or without ZeRO.)
  bool reduces = false;
  for (int p = 0; p < s.strategy.positions(); ++p)
    reduces = reduces || s.strategy.stages[static_cast<size_t>(p)].replicas * s.strategy.copies() > 1;
  if (!s.strategy.overlap_grad_reduce && !reduces)
    out.push_back(
        "strategy.overlap_grad_reduce: no effect: no data-parallel ranks to reduce gradients with");
  return out;
}

}  // namespace

std::vector<std::string> what_if_warnings(const Scenario& s, const std::vector<std::string>& keys) {
  const auto& layers = s.model.layers;
  const auto count = [&](auto pred) {
    return static_cast<size_t>(std::count_if(layers.begin(), layers.end(), pred));
  };
  // Times given per micro-batch (inline or a profile at its own batch), and any measured
  // or given times (also those a profile's model.batch scaled).
  const size_t fixed = count([](const Layer& l) { return l.source == "profile"; });
  const size_t given = count([](const Layer& l) { return l.source.starts_with("profile"); });
  const RecomputeModules modules = s.strategy.recompute_modules;
  const bool no_core = count([modules](const Layer& l) {
                         const RecomputeCost c = l.selective(modules);
                         return c.bytes > 0 || c.forward > Time::zero();
                       }) == 0;
  // GPU keys that change compute (not memory, reserved bytes, the per-op overhead or the
  // share communication takes, which act on given times too).
  const auto gpu_compute = [](const std::string& k) {
    if (k == "cluster.gpu") return true;
    if (!k.starts_with("cluster.gpu.")) return false;
    const std::string leaf = k.substr(12);
    return leaf != "memory" && leaf != "reserved" && leaf != "launch_overhead" && leaf != "name" &&
           leaf != "comm_interference";
  };
  std::vector<std::string> out;
  const auto add = [&](std::string w) {
    if (std::find(out.begin(), out.end(), w) == out.end()) out.push_back(std::move(w));
  };
  for (const std::string& k : keys) {
    if (k == "training.micro_batch" && fixed > 0)
      add(fmt::format(
          "training.micro_batch: {} of {} layers have fixed per-micro-batch times and keep them "
          "at any micro-batch; only the number of micro-batches changes (a profile's "
          "model.batch, or a generated or shape-described model, scales them)",
          fixed, layers.size()));
    if (gpu_compute(k) && given > 0)
      add(fmt::format(
          "{}: {} of {} layers have given or measured times, which do not change with the "
          "GPU's compute; only memory capacity{} follows it (a generated or shape-described "
          "model is priced on the GPU)",
          k, given, layers.size(), given < layers.size() ? " and the other layers" : ""));
    if (k == "training.precision" && given > 0)
      add(fmt::format(
          "training.precision: {} of {} layers have given or measured times, which do not "
          "change with the precision; only memory (weights, gradients, optimizer state) does",
          given, layers.size()));
    if (k == "strategy.recompute" && s.strategy.recompute == Recompute::kSelective && no_core)
      add("strategy.recompute: selective recomputation re-runs the modules "
          "strategy.recompute_modules names (the attention core unless it says otherwise), and "
          "no layer has them (given times): no effect; full recomputes whole layers");
  }
  return out;
}

namespace {

// training.failures for the GPUs the run uses (SPEC section 10, sim/goodput.h). A checkpoint
// holds the weights as they are gathered (16-bit; fp8 with training.fp8_params, not fp8's
// copies of 16-bit weights, cast again on load) and the optimizer state (with its master
// copy); given as a rate,
// every GPU holding a distinct part writes its part at that rate at once: all GPUs under
// ZeRO (the optimizer state is sharded over the data-parallel ranks, as Megatron-LM's
// distributed checkpoints save it), else one data-parallel copy.
FailureModel failure_model(const Scenario& s, const RunInfo& info) {
  const Failures& f = *s.training.failures;
  FailureModel m;
  m.cluster_mtbf_s = f.mtbf_per_gpu_s / std::max(1, info.gpus);
  m.restart_s = f.restart_s;
  m.checkpoint_every_s = f.checkpoint_every_s;
  if (f.checkpoint_s) {
    m.checkpoint_s = *f.checkpoint_s;
  } else {
    const ParamBytes pb = bytes_per_param(s.training);
    double bytes = 0;
    for (const Layer& l : s.model.layers)
      bytes += static_cast<double>(l.params) * static_cast<double>(pb.gathered + pb.optimizer);
    const int writers =
        info.zero_applies ? info.gpus : std::max(1, info.gpus / std::max(1, info.parallelism.data));
    m.checkpoint_s = bytes / writers / f.checkpoint_bytes_per_s;
  }
  return m;
}

}  // namespace

RunInfo run_info(const Scenario& s, double wall_s, const std::vector<Override>& overrides) {
  RunInfo info;
  info.scenario = s.name;
  info.schedule = std::string(to_string(s.strategy.schedule));
  info.samples_per_iteration = s.training.global_batch;
  info.iterations = s.training.iterations;
  info.asynchronous = is_async(s.strategy.schedule);
  info.wall_s = wall_s;
  // Model FLOPs: forward + backward (2 x forward) of every micro-batch of the iteration;
  // the hardware also re-runs the forward of what it recomputes.
  const bool known = std::all_of(s.model.layers.begin(), s.model.layers.end(),
                                 [](const Layer& l) { return l.forward_flops > 0; });
  if (known && !s.model.layers.empty()) {
    double forward = 0;
    for (const Layer& l : s.model.layers) forward += l.forward_flops;
    const auto micro_batches =
        static_cast<double>(s.training.global_batch) / static_cast<double>(s.training.micro_batch);
    info.model_flops = 3 * forward * micro_batches;
    // Recompute re-runs the forward (full: of the layers it checkpoints) or the attention
    // core (selective) of its stages.
    double again = 0;
    const std::vector<Recompute> modes = recompute_modes(s);
    for (size_t g = 0; g < modes.size(); ++g) {
      const StageSpec& st = s.strategy.stages[g];
      const std::vector<char> rerun =
          checkpointed_layers(s.model, st.first_layer, st.last_layer, s.strategy.recompute_layers);
      for (int l = st.first_layer; l <= st.last_layer; ++l) {
        const Layer& x = s.model.layers[static_cast<size_t>(l)];
        if (modes[g] == Recompute::kFull && rerun[static_cast<size_t>(l - st.first_layer)])
          again += x.forward_flops;
        else if (modes[g] == Recompute::kSelective)
          again += x.selective(s.strategy.recompute_modules).flops;
      }
    }
    info.hardware_flops = info.model_flops + again * micro_batches;
  }
  for (const auto& copy : s.placement) {
    for (const auto& pos : copy) info.gpus += static_cast<int>(pos.size());
  }
  // Mixed GPUs: the mean peak of the GPUs used (MFU = model FLOPs / their summed peaks).
  double peaks = 0;
  for (const auto& copy : s.placement) {
    for (const auto& pos : copy) {
      for (int d : pos) {
        const GpuSpec& gpu = s.cluster.device(d).gpu;
        peaks += s.training.precision != Precision::kFp32 ? gpu.peak_flops : gpu.peak_fp32_flops;
      }
    }
  }
  info.peak_flops_per_gpu = info.gpus > 0 ? peaks / info.gpus : 0;
  info.tokens_per_sample = s.model.tokens_per_sample;
  info.layout = layout(s);
  info.parallelism.pipeline = s.strategy.positions();
  for (int p = 0; p < s.strategy.positions(); ++p) {
    const StageSpec& stage = s.strategy.stages[static_cast<size_t>(p)];
    info.parallelism.tensor = std::max(info.parallelism.tensor, s.strategy.tensor_of(stage));
    info.parallelism.data = std::max(info.parallelism.data, stage.replicas * s.strategy.data);
  }
  info.parallelism.context = s.strategy.context;
  info.parallelism.expert = s.strategy.expert;
  info.sequence_parallel = s.strategy.sequence_parallel;
  info.zero = s.strategy.zero;
  for (int p = 0; p < s.strategy.positions() && s.strategy.zero > 0; ++p)  // any shard to split
    info.zero_applies =
        info.zero_applies ||
        s.strategy.stages[static_cast<size_t>(p)].replicas * s.strategy.copies() > 1;
  info.warnings = run_warnings(s, info.gpus, info.zero_applies);
  std::vector<std::string> keys;
  for (const Override& o : overrides) keys.push_back(o.key);
  for (std::string& w : what_if_warnings(s, keys)) info.warnings.push_back(std::move(w));
  for (const Override& o : overrides) info.overrides.emplace_back(o.key, o.value);
  info.pipeline_devices = s.strategy.positions();
  info.virtual_stages = s.strategy.virtual_stages;
  if (s.training.failures) info.failures = failure_model(s, info);
  if (!info.asynchronous) {
    info.megatron_bubble =
        static_cast<double>(info.pipeline_devices - 1) /
        (static_cast<double>(info.virtual_stages) * static_cast<double>(s.micro_batches));
  }
  return info;
}

std::vector<int> stashed_versions(const Scenario& s) {
  return stashed_versions(s.strategy.schedule, position_replicas(s));
}

LinkCosts link_costs(const Cluster& c) {
  return {[&c](int from, int to, int64_t bytes) {
            return Cluster::transfer_time(c.route(from, to), bytes);
          },
          [&c](int device) { return c.device(device).node; }};
}

Time allreduce_estimate(const Cluster& c, const std::vector<int>& devices, int64_t bytes,
                        AllReduceAlgo algo) {
  return allreduce_estimate(link_costs(c), devices, bytes, algo);
}

std::vector<AllReduceAlgo> allreduce_algorithms(const Scenario& s) {
  const int P = s.strategy.positions();
  std::vector<AllReduceAlgo> out(static_cast<size_t>(P), AllReduceAlgo::kRing);
  const ParamBytes pb = bytes_per_param(s.training);
  for (int p = 0; p < P; ++p) {
    if (s.strategy.allreduce) {
      out[static_cast<size_t>(p)] = *s.strategy.allreduce;
      continue;
    }
    // The data-parallel group of tensor rank 0 (every rank's group looks alike).
    const int t = s.strategy.tensor_of(s.strategy.stages[static_cast<size_t>(p)]);
    std::vector<int> devices;
    for (const auto& copy : s.placement) {
      const auto& lanes = copy[static_cast<size_t>(p)];
      for (size_t lane = 0; lane < lanes.size(); lane += static_cast<size_t>(t))
        devices.push_back(lanes[lane]);
    }
    int64_t params = 0;
    for (size_t g = 0; g < s.strategy.stages.size(); ++g) {
      if (s.strategy.position_of(static_cast<int>(g)) != p) continue;
      params = checked_add(
          params,
          s.model.stage_params(s.strategy.stages[g].first_layer, s.strategy.stages[g].last_layer),
          "a gradient all-reduce");
    }
    out[static_cast<size_t>(p)] = fastest_allreduce(
        link_costs(s.cluster), devices,
        checked_mul(params / t, pb.gradients, "a gradient all-reduce"));
  }
  return out;
}

TaskGraph scenario_task_graph(const Scenario& s, bool compact_rings,
                              const std::function<TaskGraph(LoweringInput)>& lowerer) {
  // (Every copy built: the load checked one copy's ops, sized for runs that fold.)
  if (!lowerer) {
    try {
      check_work(estimate_work(s), compact_rings ? Collectives::kCompact : Collectives::kExpanded);
    } catch (InputError& e) {
      e.set_location_if_empty(s.strategy_at.file.empty() ? Location{s.source, 0, 0}
                                                         : s.strategy_at);
      throw;
    }
  }
  try {
    LoweringInput in;
    in.orders = scenario_orders(s);
    in.stages =
        stage_profiles(s.model, s.strategy.stages, recompute_modes(s), stage_tensor_degrees(s),
                       s.strategy.sequence_parallel, group_degrees(s), activation_scope(s));
    in.context = s.strategy.context;
    in.expert = s.strategy.expert;
    in.expert_tensor = s.strategy.expert_tensor;
    in.v_shape = is_v_shape(s.strategy.schedule);
    // (The scenario outlives the lowering: its placement is lent, not copied; an empty
    // owner makes the pointer one that owns nothing.)
    in.placement = std::shared_ptr<const Placement>(std::shared_ptr<const void>(), &s.placement);
    for (int p = 0; p < s.strategy.positions(); ++p)
      in.tensor.push_back(s.strategy.tensor_of(s.strategy.stages[static_cast<size_t>(p)]));
    in.sequence_parallel = s.strategy.sequence_parallel;
    in.tensor_overlap = s.strategy.tensor_overlap;
    in.p2p_overlap = s.strategy.p2p_overlap;
    in.overlap_param_gather = s.strategy.overlap_param_gather;
    in.overlap_grad_reduce = s.strategy.overlap_grad_reduce;
    in.zero = s.strategy.zero;
    in.num_devices = s.cluster.num_devices();
    in.micro_batches_per_iteration = static_cast<int>(s.micro_batches);
    in.micro_batch_samples = s.training.micro_batch;
    in.param_bytes = bytes_per_param(s.training);
    in.gradient_bytes_per_param = in.param_bytes.gradients;
    in.stashed_versions = stashed_versions(s);
    // Each GPU's reserve and launch overhead (left empty where every GPU has none: the
    // lowering then skips them), read GPU by GPU only where GPUs differ in them.
    const auto devices = static_cast<size_t>(s.cluster.num_devices());
    if (s.cluster.same_overheads()) {
      const GpuSpec& gpu = s.cluster.device(0).gpu;
      if (gpu.reserved_bytes != 0) in.reserved_bytes.assign(devices, gpu.reserved_bytes);
      if (gpu.launch_overhead > Time::zero())
        in.launch_overhead.assign(devices, gpu.launch_overhead);
    } else {
      bool launch = false;
      in.reserved_bytes.reserve(devices);
      in.launch_overhead.reserve(devices);
      for (const Device& d : s.cluster.devices()) {
        in.reserved_bytes.push_back(d.gpu.reserved_bytes);
        in.launch_overhead.push_back(d.gpu.launch_overhead);
        launch = launch || d.gpu.launch_overhead > Time::zero();
      }
      if (!launch) in.launch_overhead.clear();
    }
    in.device_node = s.cluster.device_nodes();
    if (auto speed = std::make_shared<const DeviceSpeed>(s); !speed->uniform())
      in.compute_scale = [speed](int device, int stage) { return speed->scale(device, stage); };
    in.user_order = !s.user_order.empty();
    in.compact_rings = compact_rings;
    in.allreduce = allreduce_algorithms(s);
    in.bucket_bytes = s.strategy.bucket_bytes;
    in.bucket_buffers = s.strategy.bucket_buffers;
    return lowerer ? lowerer(std::move(in)) : lower(in);
  } catch (InputError& e) {
    // A deadlocking hand-written order points at strategy.order; anything else (a total too
    // large to simulate) at the scenario file, and at the cluster: the model's times, bytes
    // and parameters and the compute's simulated time were bounded when it was loaded, so
    // what overflows here is a transfer's time (a link's latency or bandwidth).
    e.set_location_if_empty(e.key() == "strategy.order" ? s.user_order_at
                            : e.key() == "strategy" && !s.strategy_at.file.empty()
                                ? s.strategy_at
                                : Location{s.source, 0, 0});
    e.set_key_if_empty("cluster");
    throw;
  }
}

TaskGraph folded_task_graph(const Scenario& s, double max_full_ops, double estimated_full_ops) {
  // (By default a run the loader admitted counting every copy builds as it always did; one
  // it admitted counting one copy must fold, or stop before every copy is built. The
  // estimate is taken from `s` as it is now, not kept from the loader: sweep points and the
  // planner change scenarios after loading, and it costs stages x layers.)
  if (max_full_ops == std::numeric_limits<double>::infinity()) {
    const double ops = estimate_work(s).compact_ops();
    if (ops > kMaxSimulatedOps) {
      max_full_ops = kMaxSimulatedOps;
      estimated_full_ops = ops;
    }
  }
  return scenario_task_graph(s, true, [&](LoweringInput in) {
    return lower_folded(std::move(in), s.cluster, max_full_ops, estimated_full_ops);
  });
}

}  // namespace pipesim
