#include "planner/judge.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/units.h"
#include "parallel/distributed.h"
#include "planner/candidate_io.h"
#include "scenario/device_speed.h"
#include "scenario/setup.h"
#include "schedules/partition.h"
#include "sim/copies.h"
#include "sim/engine.h"
#include "sim/report.h"

namespace pipesim::planner {

namespace {

std::string layer_range(const StageSpec& s) {
  return s.first_layer == s.last_layer ? fmt::format("{}", s.first_layer)
                                       : fmt::format("{}-{}", s.first_layer, s.last_layer);
}

// Where the strategy's GPUs come from, as a scenario writes it: the policy, or the device
// lists by name, copy by copy.
nlohmann::ordered_json placement_json(const StrategyPlacement& gpus, const Cluster& c) {
  if (!gpus.given_lists) return std::string(to_string(gpus.policy));
  nlohmann::ordered_json lists = nlohmann::ordered_json::array();
  for (const auto& stage : gpus.lists) {
    nlohmann::ordered_json names = nlohmann::ordered_json::array();
    for (int d : stage) names.push_back(c.device(d).name);
    lists.push_back(std::move(names));
  }
  return lists;
}

// A strategy section as a scenario file writes it: what differs from the defaults, in the
// order of SPEC sections 3, 3.1 and 9 (the loader reads it back as `st` and `gpus`).
nlohmann::ordered_json strategy_section(const Strategy& st, const StrategyPlacement& gpus,
                                        const Cluster& c) {
  nlohmann::ordered_json j;
  j["schedule"] = std::string(to_string(st.schedule));
  j["stages"] = nlohmann::ordered_json::array();
  for (const StageSpec& s : st.stages)
    j["stages"].push_back({{"layers", layer_range(s)}, {"replicas", s.replicas}});
  j["data"] = st.data;
  if (st.tensor > 1) j["tensor"] = st.tensor;
  if (st.context > 1) {
    j["context"] = st.context;
    if (st.context_comm != ContextComm::kP2p)
      j["context_comm"] = std::string(to_string(st.context_comm));
  }
  if (st.expert > 1 || st.expert_tensor > 1) {
    j["expert"] = st.expert;
    if (st.expert_tensor > 1) j["expert_tensor"] = st.expert_tensor;
    if (st.dedup_dispatch) j["expert_dispatch"] = "flex";
    if (st.shared_expert_overlap) j["shared_expert_overlap"] = true;
  }
  if (st.routing_imbalance != 1.0) j["routing_imbalance"] = st.routing_imbalance;
  if (st.sequence_parallel) j["sequence_parallel"] = true;
  if (st.zero > 0) j["zero"] = st.zero;
  if (st.recompute != Recompute::kNone) j["recompute"] = std::string(to_string(st.recompute));
  if (st.recompute == Recompute::kSelective && st.recompute_modules != kDefaultRecomputeModules) {
    j["recompute_modules"] = nlohmann::ordered_json::array();
    for (int m = 0; m < kRecomputeModuleCount; ++m)
      if ((st.recompute_modules & module_bit(static_cast<RecomputeModule>(m))) != 0)
        j["recompute_modules"].push_back(std::string(to_string(static_cast<RecomputeModule>(m))));
  }
  if (st.virtual_stages > 1) j["virtual_stages"] = st.virtual_stages;
  if (st.warmup != Warmup::kSchedule) j["warmup"] = std::string(to_string(st.warmup));
  j["placement"] = placement_json(gpus, c);
  if (st.allreduce) j["allreduce"] = std::string(to_string(*st.allreduce));
  if (st.bucket_bytes != Strategy{}.bucket_bytes)
    j["bucket"] = fmt::format("{} B", st.bucket_bytes);
  if (st.bucket_buffers) j["bucket_buffers"] = true;
  if (st.tensor_overlap != TensorOverlap::kNone)
    j["tensor_overlap"] = st.tensor_overlap == TensorOverlap::kFull ? "full" : "backward";
  if (!st.p2p_overlap) j["p2p_overlap"] = false;
  if (!st.overlap_grad_reduce) j["overlap_grad_reduce"] = false;
  if (st.overlap_param_gather) j["overlap_param_gather"] = true;
  return j;
}

}  // namespace

nlohmann::ordered_json strategy_json(const PlanPoint& p, const Scenario& base) {
  return strategy_section(strategy_of(p, base), placement_of(p, base), base.cluster);
}

namespace {

// The framework's settings, which every plan keeps from the scenario: the tensor and
// pipeline overlaps, the gradient buckets, the all-reduce algorithm, the modules a
// selective recompute re-runs.
Strategy framework_settings(const Strategy& b) {
  Strategy st;
  st.allreduce = b.allreduce;
  st.bucket_bytes = b.bucket_bytes;
  st.bucket_buffers = b.bucket_buffers;
  st.tensor_overlap = b.tensor_overlap;
  st.p2p_overlap = b.p2p_overlap;
  st.overlap_grad_reduce = b.overlap_grad_reduce;
  st.recompute_modules = b.recompute_modules;  // what `selective` re-runs
  return st;
}

}  // namespace

Strategy strategy_of(const PlanPoint& p, const Scenario& base) {
  const Strategy& b = base.strategy;
  Strategy st = framework_settings(b);
  st.schedule = p.schedule;
  for (const StageSpec& s : p.stages)
    st.stages.push_back(
        {s.first_layer, s.last_layer, s.replicas, std::nullopt, std::nullopt, std::nullopt});
  st.data = p.data;
  st.tensor = p.tensor;
  st.context = p.context;
  if (p.context > 1) st.context_comm = b.context_comm;
  st.expert = p.expert;
  st.expert_tensor = p.expert_tensor;
  if (p.expert > 1) {
    st.dedup_dispatch = b.dedup_dispatch;
    st.shared_expert_overlap = b.shared_expert_overlap;
  }
  st.routing_imbalance = b.routing_imbalance;
  st.sequence_parallel = p.sequence_parallel && p.tensor > 1;
  st.zero = p.zero;
  if (p.schedule != ScheduleKind::kGpipeRecompute) st.recompute = p.recompute;
  st.virtual_stages = p.virtual_stages > 1               ? p.virtual_stages
                      : p.schedule == ScheduleKind::kZbV ? 2
                                                         : 1;
  st.warmup = p.warmup;
  st.overlap_grad_reduce = b.overlap_grad_reduce || p.zero > 1;
  st.overlap_param_gather = b.overlap_param_gather && (p.zero == 1 || p.zero == 2);
  return st;
}

StrategyPlacement placement_of(const PlanPoint& p, const Scenario& base) {
  StrategyPlacement gpus;
  if (p.stage_placement.empty()) {
    gpus.policy = p.placement;
    return gpus;
  }
  gpus.given_lists = true;
  for (const auto& copy : p.devices(base.cluster))
    for (const auto& stage : copy) gpus.lists.push_back(stage);
  return gpus;
}

const Scenario& Judge::at_micro_batch(int64_t b) const {
  const std::lock_guard<std::mutex> lock(scenarios_mutex_);
  std::unique_ptr<Scenario>& sc = scenarios_[b];
  if (!sc) {
    // The strategy: any that every micro-batch size takes (the scenario's own may not).
    // (With the framework's settings, which the cost model reads.)
    Strategy trivial = framework_settings(base_.strategy);
    trivial.schedule =
        is_async(base_.strategy.schedule) ? ScheduleKind::kPipeDream : ScheduleKind::kDapple;
    trivial.stages = even_partition(base_.model, 1);
    sc = std::make_unique<Scenario>(with_strategy(base_, trivial, {}, b));
  }
  return *sc;
}

Scenario Judge::scenario_of(const PlanPoint& p) const {
  return with_strategy(at_micro_batch(p.micro_batch), strategy_of(p, base_),
                       placement_of(p, base_));
}

void Judge::progress(const std::string& line) const {
  if (opt_.progress == nullptr) return;
  std::lock_guard<std::mutex> lock(progress_mutex_);
  *opt_.progress << "pipesim plan: " << line << "\n";
}

bool Judge::orderable(const PlanPoint& p) const {
  if (p.schedule != ScheduleKind::kZbV) return true;
  try {
    scenario_orders(scenario_of(p));
    return true;
  } catch (const InputError&) {
    return false;
  }
}

std::optional<Candidate> Judge::simulate_one(const PlanPoint& p, const Estimate& estimate) const {
  Candidate c;
  c.point = p;
  c.strategy = strategy_json(p, base_);
  if (p.micro_batch != base_.training.micro_batch) c.micro_batch = p.micro_batch;
  c.estimate_s = estimate.iteration_s;
  c.estimated_memory = estimate.peak_memory;
  try {
    const Scenario sc = scenario_of(p);
    // The estimate counts identical copies once where they fold; where no group of them may
    // be built (the simulator chose a tree or hierarchy for this placement's all-reduce),
    // its multiple stands for the graph of every copy (lower_folded).
    simulate_scenario(sc, c, deadline_, opt_.max_sim_work,
                      estimate.folded_copies > 1 ? estimate.work * estimate.folded_copies : 0);
    if (!DeviceSpeed(sc).uniform()) speed_balanced(sc, c);
  } catch (const CopiesDoNotFold&) {
    throw;  // too large to simulate: counted as such by the caller
  } catch (const InputError&) {
    return std::nullopt;
  }
  mark_tight(c);
  return c;
}

// On GPUs of different speeds (mixed GPUs, stragglers), the plan's layers split again by
// each stage's slowest GPU (scenario/device_speed.h): `c` becomes that split when it ranks
// better.
void Judge::speed_balanced(const Scenario& sc, Candidate& c) const {
  PlanPoint q = c.point;
  q.stages = speed_balanced_stages(sc);
  bool same = true;
  for (size_t g = 0; g < q.stages.size(); ++g)
    same = same && q.stages[g].first_layer == c.point.stages[g].first_layer;
  if (same) return;
  Candidate b = c;
  b.point = q;
  b.strategy = strategy_json(q, base_);
  try {
    simulate_scenario(scenario_of(q), b, deadline_);
  } catch (const InputError&) {
    return;  // the split the planner chose stands
  }
  if (ranks_before(b, c)) c = std::move(b);
}

Candidate Judge::estimated_only(const Costed& c) const {
  Candidate e;
  e.point = c.point;
  e.strategy = strategy_json(c.point, base_);
  if (c.point.micro_batch != base_.training.micro_batch) e.micro_batch = c.point.micro_batch;
  e.estimate_s = e.iteration_s = c.estimate.iteration_s;
  e.makespan_s = c.estimate.iteration_s * base_.training.iterations;
  e.throughput = static_cast<double>(base_.training.global_batch) / c.estimate.iteration_s;
  e.estimated_memory = e.peak_memory = c.estimate.peak_memory;
  e.oom = !c.estimate.fits;
  e.estimated_only = true;
  e.why = "estimated only: the time limit stopped its simulation";
  mark_tight(e);
  return e;
}

void Judge::mark_tight(Candidate& c) const {
  if (opt_.headroom <= 0 || c.oom) return;
  int64_t least = std::numeric_limits<int64_t>::max();
  for (const Device& d : base_.cluster.devices()) least = std::min(least, d.gpu.memory_bytes);
  c.tight = static_cast<double>(c.peak_memory) > (1 - opt_.headroom) * static_cast<double>(least);
}

void Judge::simulate_scenario(const Scenario& sc, Candidate& c, const Deadline& deadline,
                              double max_ops, double estimated_ops) {
  // (A graph of every copy past max_ops is refused before it is built.)
  const TaskGraph graph = folded_task_graph(sc, max_ops, estimated_ops);
  // Copies that do not fold after all (an all-reduce chosen as a tree, two copies' traffic on
  // one NIC...) would cost every copy's simulation.
  if (graph.built_copies() == graph.copies() && graph.copies() > 1 &&
      static_cast<double>(graph.size()) > max_ops)
    throw CopiesDoNotFold(fmt::format("{} ops: its copies do not fold", graph.size()),
                          "a plan small enough to simulate", "strategy");
  SimOptions options;
  options.deadline = deadline;
  const Timeline tl = simulate(graph, sc.cluster, options);
  const RunInfo info = run_info(sc, 0.0);
  const Report rep = make_report(graph, sc.cluster, tl, info);
  c.makespan_s = rep.makespan.seconds();
  c.iteration_s = rep.iteration_time.seconds();
  c.throughput = rep.throughput;
  for (const DeviceReport& dr : rep.devices)
    c.peak_memory = std::max(c.peak_memory, dr.peak_memory);
  c.oom = rep.oom.oom;
  c.why = bound_line(rep);
  if (rep.goodput) c.goodput = rep.goodput->goodput;
}

std::vector<std::optional<Candidate>> Judge::simulate_all(const std::vector<Costed>& list,
                                                          Plan& result) const {
  std::vector<std::optional<Candidate>> out(list.size());
  std::atomic<size_t> finished{0};
  std::atomic<bool> timed_out{false};
  std::atomic<int> rejected{0}, too_large{0};
  std::mutex best_mutex;
  double best = 0;
  double work = 0, largest = 0;
  for (const Costed& c : list) {
    work += c.estimate.work;
    largest = std::max(largest, c.estimate.work);
  }
  progress(fmt::format("simulating {} strategies (predicted work {:.3g}, largest {:.3g})",
                       list.size(), work, largest));
  auto worker = [&](size_t i) {
    // Without a time limit the best estimate always runs.
    if ((i > 0 && past_deadline()) || !may_finish(list[i].estimate.work)) {
      timed_out = true;
      return;
    }
    try {
      out[i] = simulate_one(list[i].point, list[i].estimate);
    } catch (const DeadlinePassed&) {
      timed_out = true;
      return;
    } catch (const CopiesDoNotFold&) {
      ++too_large;
      return;
    }
    if (!out[i]) {
      ++rejected;
      return;
    }
    const size_t n = ++finished;
    std::lock_guard<std::mutex> lock(best_mutex);
    if (out[i]->fits()) best = std::max(best, out[i]->goodput_throughput());
    if (opt_.progress != nullptr && (n % 16 == 0 || n == list.size()))
      progress(fmt::format("simulated {}/{}, best so far {:.1f} samples/s", n, list.size(), best));
  };
  // Every core, and every rank under mpirun (each rank then holds every result).
  distributed_for({list.size(),
                   opt_.threads,
                   worker,
                   [&](size_t i) { return save_candidate(out[i]); },
                   [&](size_t i, std::string_view b) { out[i] = load_candidate(b, list[i].point); },
                   {}});
  result.timed_out = result.timed_out || timed_out;
  result.rejected += rejected;
  result.too_large += too_large;
  return out;
}

std::string Judge::key_of(const PlanPoint& p) const {
  return strategy_json(p, base_).dump() + std::to_string(p.micro_batch);
}

bool Judge::ranks_before(const Candidate& a, const Candidate& b) {
  if (a.fits() != b.fits()) return a.fits();
  if (a.oom != b.oom) return !a.oom;
  if (a.estimated_only != b.estimated_only) return !a.estimated_only;  // simulated first
  // With failures, what a plan delivers is its throughput while the job makes progress.
  if (a.fits() && a.goodput_throughput() != b.goodput_throughput())
    return a.goodput_throughput() > b.goodput_throughput();
  if (a.peak_memory != b.peak_memory) return a.peak_memory < b.peak_memory;
  return a.strategy.dump() < b.strategy.dump();  // deterministic whatever the thread count
}

// Memory: the estimate steers which plans are simulated, and a plan it says fits that runs
// out of memory is said (SPEC: nothing silent).
void Judge::memory_errors(const std::vector<Candidate>& done, Plan& result) const {
  int64_t least = std::numeric_limits<int64_t>::max();
  for (const Device& d : base_.cluster.devices()) least = std::min(least, d.gpu.memory_bytes);
  const double room = (1 - opt_.headroom) * static_cast<double>(least);
  double mem_sum = 0, worst_miss = 0;
  int costed = 0;
  for (const Candidate& c : done) {
    if (c.estimated_memory <= 0 || c.peak_memory <= 0 || c.estimated_only) continue;
    ++costed;
    const double e = std::abs(static_cast<double>(c.estimated_memory - c.peak_memory)) /
                     static_cast<double>(c.peak_memory);
    mem_sum += e;
    result.memory_error_max = std::max(result.memory_error_max, e);
    if (static_cast<double>(c.estimated_memory) <= room && c.oom) {
      ++result.memory_misses;
      worst_miss = std::max(worst_miss, static_cast<double>(c.peak_memory) / room - 1);
    }
  }
  if (costed > 0) result.memory_error_mean = mem_sum / costed;
  if (result.memory_misses > 0)
    result.warnings.push_back(fmt::format(
        "the estimate said {} simulated plan{} fit that ran out of memory (up to {:.1f} % "
        "over); plans it did not simulate near the GPUs' memory may not fit either "
        "(memory_estimate_error in the JSON)",
        result.memory_misses, result.memory_misses == 1 ? "" : "s", 100 * worst_miss));
}

void Judge::finish(std::vector<Candidate>& done, Plan& result) const {
  std::sort(done.begin(), done.end(), ranks_before);
  double sum = 0;
  int simulated = 0;
  for (const Candidate& c : done) {
    if (c.estimated_only) continue;
    const double e = std::abs(c.estimate_s - c.iteration_s) / std::max(1e-12, c.iteration_s);
    sum += e;
    ++simulated;
    result.estimate_error_max = std::max(result.estimate_error_max, e);
  }
  if (simulated > 0) result.estimate_error_mean = sum / simulated;
  memory_errors(done, result);
  // Pareto front over (iteration time, peak memory) among those that fit (all if none).
  const bool any_fit = !done.empty() && done.front().fits();
  std::vector<const Candidate*> by_time;
  for (const Candidate& c : done)
    if (!any_fit || c.fits()) by_time.push_back(&c);
  std::stable_sort(by_time.begin(), by_time.end(), [](const Candidate* a, const Candidate* b) {
    if (a->iteration_s != b->iteration_s) return a->iteration_s < b->iteration_s;
    return a->peak_memory < b->peak_memory;
  });
  int64_t least = std::numeric_limits<int64_t>::max();
  for (const Candidate* c : by_time) {
    if (c->peak_memory < least) {
      least = c->peak_memory;
      result.pareto.push_back(*c);
    }
  }
  if (done.size() > static_cast<size_t>(opt_.top)) done.resize(static_cast<size_t>(opt_.top));
  result.candidates = std::move(done);
}

}  // namespace pipesim::planner
