// The strategy section: schedule, stages, data parallelism, a hand-written order and the
// placement of every stage replica on the cluster's devices.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <set>
#include <sstream>

#include "core/error.h"
#include "scenario/internal/locator.h"
#include "scenario/internal/reader.h"
#include "scenario/internal/sections.h"
#include "schedules/partition.h"
#include "topology/placement.h"

namespace pipesim::internal {
namespace {

// "0-3" or "5": an inclusive layer range.
std::pair<int, int> read_range(const Reader& r, const YAML::Node& n, const std::string& path,
                               int num_layers) {
  const std::string allowed = fmt::format("'first-last' or one index, within 0-{}", num_layers - 1);
  const std::string s = r.scalar(n, path, allowed);
  auto number = [&](std::string_view part) {
    int v = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || ptr != part.data() + part.size())
      r.fail(n, path, fmt::format("'{}' is not a layer range", s), allowed);
    return v;
  };
  const auto dash = s.find('-');
  const int first = number(std::string_view(s).substr(0, dash));
  const int last = dash == std::string::npos ? first : number(std::string_view(s).substr(dash + 1));
  if (first > last) r.fail(n, path, fmt::format("range '{}' runs backwards", s), allowed);
  if (last >= num_layers)
    r.fail(n, path, fmt::format("range '{}' goes past the last layer {}", s, num_layers - 1),
           allowed);
  return {first, last};
}

// strategy.order: one line per pipeline position in `pipesim order` notation. Each F and B
// of every (micro-batch, chunk) exactly once; W and R at most once. Deadlocks are found
// later, when the TaskGraph is validated.
void read_order(const Reader& r, const YAML::Node& n, Scenario& sc) {
  const Strategy& st = sc.strategy;
  const int P = st.positions(), v = st.virtual_stages, M = static_cast<int>(sc.micro_batches);
  const std::string allowed =
      fmt::format("{} lines like 'F0 F1 B0 B1', one per pipeline position", P);
  if (is_async(st.schedule))
    r.fail(n, "strategy.order", "hand-written orders are for synchronous schedules", allowed);
  if (!n.IsSequence() || static_cast<int>(n.size()) != P) {
    r.fail(n, "strategy.order",
           fmt::format("expected {} lines, got {}", P, n.IsSequence() ? n.size() : 0), allowed);
  }
  for (int p = 0; p < P; ++p) {
    const std::string path = fmt::format("strategy.order.{}", p);
    const YAML::Node line = n[static_cast<size_t>(p)];
    StepList steps;
    if (auto problem = parse_steps(r.scalar(line, path, allowed), steps))
      r.fail(line, path, *problem, allowed);
    std::vector<int> seen(static_cast<size_t>(4) * v * M, 0);
    for (const Step& s : steps) {
      if (s.micro_batch >= M || s.chunk >= v) {
        r.fail(line, path, fmt::format("{} is out of range", format_steps({s}, v > 1)),
               fmt::format("micro-batches 0-{}{}", M - 1,
                           v > 1 ? fmt::format(", chunks 0-{}", v - 1) : ""));
      }
      int& count = seen[(static_cast<size_t>(s.kind) * v + s.chunk) * M + s.micro_batch];
      if (++count > 1)
        r.fail(line, path, fmt::format("{} appears twice", format_steps({s}, v > 1)),
               "each step once");
    }
    for (OpKind k : {OpKind::kForward, OpKind::kBackward}) {
      for (int c = 0; c < v; ++c) {
        for (int m = 0; m < M; ++m) {
          if (seen[(static_cast<size_t>(k) * v + c) * M + m] == 0) {
            r.fail(line, path, fmt::format("{} is missing", format_steps({{k, m, c}}, v > 1)),
                   "every forward and backward of the iteration");
          }
        }
      }
    }
    sc.user_order.push_back(std::move(steps));
  }
  sc.user_order_at = r.where(n, "strategy.order");
}

// strategy.warmup or a stage's warmup: schedule | deep | auto (for the 1F1B schedules:
// strategy_check.cc).
Warmup read_warmup(const Reader& r, const YAML::Node& n, const std::string& path) {
  return r.choice<Warmup>(
      n, path, {{"schedule", Warmup::kSchedule}, {"deep", Warmup::kDeep}, {"auto", Warmup::kAuto}});
}

// strategy.recompute or a stage's recompute: none | full | selective, in any schedule
// (PipeDream and 2BW re-run the forward with the weights they stashed for it);
// gpipe-recompute already means full everywhere, and saying otherwise is an error.
Recompute read_recompute(const Reader& r, const YAML::Node& n, const std::string& path,
                         const Strategy& st) {
  const Recompute m = r.choice<Recompute>(n, path,
                                          {{"none", Recompute::kNone},
                                           {"full", Recompute::kFull},
                                           {"selective", Recompute::kSelective}});
  if (m != Recompute::kFull && st.schedule == ScheduleKind::kGpipeRecompute)
    r.fail(n, path, "gpipe-recompute is gpipe with full recompute on every stage",
           "recompute: full, or schedule: gpipe with the recompute you want");
  return m;
}

// strategy.recompute_modules: Megatron-Core's --recompute-modules, a non-empty list of the
// parts selective recompute re-runs (RecomputeModule).
RecomputeModules read_recompute_modules(const Reader& r, const YAML::Node& n) {
  const char* path = "strategy.recompute_modules";
  std::string allowed;
  for (int m = 0; m < kRecomputeModuleCount; ++m)
    allowed += (m ? ", " : "") + std::string(to_string(static_cast<RecomputeModule>(m)));
  if (!n.IsSequence() || n.size() == 0)
    r.fail(n, path, "expected a non-empty list of modules", "[" + allowed + "]");
  RecomputeModules out = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string item = fmt::format("{}.{}", path, i);
    const std::string name = r.scalar(n[i], item, allowed);
    const std::optional<RecomputeModule> m = parse_recompute_module(name);
    if (!m) r.fail(n[i], item, fmt::format("unknown module '{}'", name), allowed);
    out |= module_bit(*m);
  }
  return out;
}

// strategy.context, context_comm, expert, expert_tensor, routing_imbalance and
// expert_dispatch (SPEC section 9), and shared_expert_overlap.
void read_context_and_experts(const Reader& r, const YAML::Node& n, Strategy& st) {
  if (n["context"].IsDefined())
    st.context = static_cast<int>(r.integer(n["context"], "strategy.context", 1, 4096));
  if (n["context_comm"].IsDefined()) {
    st.context_comm = r.choice<ContextComm>(n["context_comm"], "strategy.context_comm",
                                            {{"p2p", ContextComm::kP2p},
                                             {"all-gather", ContextComm::kAllGather},
                                             {"a2a", ContextComm::kA2a}});
  }
  if (n["expert"].IsDefined())
    st.expert = static_cast<int>(r.integer(n["expert"], "strategy.expert", 1, 1 << 20));
  if (n["expert_tensor"].IsDefined())
    st.expert_tensor =
        static_cast<int>(r.integer(n["expert_tensor"], "strategy.expert_tensor", 1, 4096));
  if (n["expert_dispatch"].IsDefined())
    st.dedup_dispatch = r.choice<int>(n["expert_dispatch"], "strategy.expert_dispatch",
                                      {{"alltoall", 0}, {"flex", 1}}) == 1;
  if (n["routing_imbalance"].IsDefined())
    st.routing_imbalance = r.real(n["routing_imbalance"], "strategy.routing_imbalance", 1, 1000);
  st.shared_expert_overlap =
      read_flag(r, n["shared_expert_overlap"], "strategy.shared_expert_overlap", false);
}

// strategy.stages: layer ranges (their coverage is checked with the rest), replicas and
// each stage's own warmup, recompute and tensor.
void read_stages(const Reader& r, const YAML::Node& stages, int num_layers, Strategy& st) {
  if (!stages.IsSequence() || stages.size() == 0)
    r.fail(stages, "strategy.stages", "expected a non-empty list of stages",
           "e.g. '- {layers: 0-3, replicas: 1}'");
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string p = fmt::format("strategy.stages.{}", i);
    const YAML::Node s = stages[i];
    r.expect_map(s, p, {"layers", "replicas", "warmup", "recompute", "tensor"});
    const auto [first, last] = read_range(r, r.require(s, p, "layers"), p + ".layers", num_layers);
    const int rep = s["replicas"].IsDefined()
                        ? static_cast<int>(r.integer(s["replicas"], p + ".replicas", 1, 1'000'000))
                        : 1;
    st.stages.push_back({first, last, rep, std::nullopt});
    if (s["warmup"].IsDefined())
      st.stages.back().warmup = read_warmup(r, s["warmup"], p + ".warmup");
    if (s["recompute"].IsDefined())
      st.stages.back().recompute = read_recompute(r, s["recompute"], p + ".recompute", st);
    if (s["tensor"].IsDefined())
      st.stages.back().tensor = static_cast<int>(r.integer(s["tensor"], p + ".tensor", 1, 4096));
  }
}

// strategy.placement: a policy, or device lists by name or index (their shapes are checked
// with the rest).
StrategyPlacement read_placement(const Reader& r, const YAML::Node& pl, const Cluster& cluster) {
  StrategyPlacement gpus;
  if (!pl.IsDefined()) return gpus;
  if (pl.IsScalar()) {
    gpus.policy = r.choice<PlacementPolicy>(pl, "strategy.placement",
                                            {{"fresh-first", PlacementPolicy::kFreshFirst},
                                             {"append-first", PlacementPolicy::kAppendFirst},
                                             {"scatter-first", PlacementPolicy::kScatterFirst}});
    return gpus;
  }
  gpus.given_lists = true;
  if (!pl.IsSequence()) return gpus;
  for (size_t i = 0; i < pl.size(); ++i) {
    const std::string p = fmt::format("strategy.placement.{}", i);
    const YAML::Node list = pl[i];
    std::vector<int>& devs = gpus.lists.emplace_back();
    if (!list.IsSequence()) continue;  // its length is wrong: said with the rest
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string pk = fmt::format("{}.{}", p, k);
      const std::string name = r.scalar(list[k], pk);
      int d = cluster.device_index(name);
      if (d < 0) {
        int idx = -1;
        const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), idx);
        if (ec == std::errc() && ptr == name.data() + name.size() && idx >= 0 &&
            idx < cluster.num_devices())
          d = idx;
      }
      if (d < 0)
        r.fail(list[k], pk, fmt::format("no device '{}'", name),
               fmt::format("a device name or an index 0-{}", cluster.num_devices() - 1));
      devs.push_back(d);
    }
  }
  return gpus;
}

// strategy.schedule, by name, with a "did you mean" for a near miss.
ScheduleKind read_schedule(const Reader& r, const YAML::Node& n) {
  const YAML::Node s = r.require(n, "strategy", "schedule");
  const std::string name = r.scalar(s, "strategy.schedule", schedule_names());
  const auto kind = parse_schedule(name);
  if (!kind) {
    std::vector<std::string> names;
    std::stringstream ss(schedule_names());
    for (std::string x; std::getline(ss, x, ',');)
      names.push_back(x.substr(x.find_first_not_of(' ')));
    r.fail(s, "strategy.schedule",
           fmt::format("unknown or unavailable schedule '{}'{}", name, suggestion(name, names)),
           schedule_names());
  }
  return *kind;
}

// Every option of the strategy but its stages, placement and order (their checks against
// each other and the model: strategy_check.cc).
void read_options(const Reader& r, const YAML::Node& n, Strategy& st) {
  if (n["virtual_stages"].IsDefined())
    st.virtual_stages =
        static_cast<int>(r.integer(n["virtual_stages"], "strategy.virtual_stages", 1, 64));
  else if (st.schedule == ScheduleKind::kZbV)
    st.virtual_stages = 2;  // the V's two chunks
  if (n["allreduce"].IsDefined()) {
    const auto a = r.choice<int>(n["allreduce"], "strategy.allreduce",
                                 {{"ring", 0}, {"tree", 1}, {"hierarchical", 2}, {"auto", 3}});
    if (a < 3) st.allreduce = static_cast<AllReduceAlgo>(a);
  }
  if (n["bucket"].IsDefined()) st.bucket_bytes = r.bytes(n["bucket"], "strategy.bucket");
  st.bucket_buffers = read_flag(r, n["bucket_buffers"], "strategy.bucket_buffers", false);
  st.vertical_sync = read_flag(r, n["vertical_sync"], "strategy.vertical_sync", false);
  if (n["warmup"].IsDefined()) st.warmup = read_warmup(r, n["warmup"], "strategy.warmup");
  if (n["recompute"].IsDefined())
    st.recompute = read_recompute(r, n["recompute"], "strategy.recompute", st);
  if (n["recompute_modules"].IsDefined())
    st.recompute_modules = read_recompute_modules(r, n["recompute_modules"]);
  if (n["recompute_layers"].IsDefined())
    st.recompute_layers = static_cast<int>(
        r.integer(n["recompute_layers"], "strategy.recompute_layers", 1, 1'000'000));
  if (n["offload_layers"].IsDefined())
    st.offload_layers =
        static_cast<int>(r.integer(n["offload_layers"], "strategy.offload_layers", 1, 1'000'000));
  if (n["tensor"].IsDefined())
    st.tensor = static_cast<int>(r.integer(n["tensor"], "strategy.tensor", 1, 4096));
  st.sequence_parallel = read_flag(r, n["sequence_parallel"], "strategy.sequence_parallel", false);
  if (n["tensor_overlap"].IsDefined()) {
    st.tensor_overlap = static_cast<TensorOverlap>(
        r.choice<int>(n["tensor_overlap"], "strategy.tensor_overlap",
                      {{"none", static_cast<int>(TensorOverlap::kNone)},
                       {"backward", static_cast<int>(TensorOverlap::kBackward)},
                       {"full", static_cast<int>(TensorOverlap::kFull)}}));
  }
  st.p2p_overlap = read_flag(r, n["p2p_overlap"], "strategy.p2p_overlap", true);
  // With no data-parallel ranks to shard over, a ZeRO stage is accepted and changes nothing
  // (the report says so), as DeepSpeed runs it on one rank.
  if (n["zero"].IsDefined())
    st.zero = static_cast<int>(r.integer(n["zero"], "strategy.zero", 0, 3));
  st.overlap_param_gather =
      read_flag(r, n["overlap_param_gather"], "strategy.overlap_param_gather", false);
  st.overlap_grad_reduce =
      read_flag(r, n["overlap_grad_reduce"], "strategy.overlap_grad_reduce", true);
  st.data = n["data"].IsDefined()
                ? static_cast<int>(r.integer(n["data"], "strategy.data", 1, 1'000'000))
                : 1;
  read_context_and_experts(r, n, st);
}

}  // namespace

void read_strategy(const Reader& r, const YAML::Node& n, const YAML::Node& training, Scenario& sc) {
  r.expect_map(n, "strategy",
               {"schedule",
                "stages",
                "pipeline",
                "data",
                "virtual_stages",
                "placement",
                "order",
                "vertical_sync",
                "allreduce",
                "bucket",
                "bucket_buffers",
                "warmup",
                "recompute",
                "recompute_modules",
                "recompute_layers",
                "offload_layers",
                "tensor",
                "sequence_parallel",
                "tensor_overlap",
                "p2p_overlap",
                "zero",
                "overlap_param_gather",
                "overlap_grad_reduce",
                "context",
                "context_comm",
                "expert",
                "expert_tensor",
                "routing_imbalance",
                "expert_dispatch",
                "shared_expert_overlap"});
  Strategy& st = sc.strategy;
  const int num_layers = static_cast<int>(sc.model.layers.size());
  st.schedule = read_schedule(r, n);
  read_options(r, n, st);
  const bool has_stages = n["stages"].IsDefined();
  const bool has_pipeline = n["pipeline"].IsDefined();
  if (has_stages == has_pipeline) {
    r.fail(has_stages ? n["pipeline"] : n, "strategy.stages",
           has_stages ? "give stages or pipeline, not both" : "missing required key",
           "'stages: [{layers: 0-3, replicas: 1}, ...]' or 'pipeline: N'");
  }
  if (has_pipeline) {
    const int p = static_cast<int>(r.integer(n["pipeline"], "strategy.pipeline", 1, 1'000'000));
    const int v = st.virtual_stages;
    if (int64_t{p} * v > num_layers)
      r.fail(n["pipeline"], "strategy.pipeline",
             v == 1 ? fmt::format("{} stages but the model has {} layers", p, num_layers)
                    : fmt::format("{} x {} chunks but the model has {} layers", p, v, num_layers),
             "at most one stage per layer");
    st.stages = even_partition(sc.model, p * v);
    sc.pipeline = p;
  } else {
    read_stages(r, n["stages"], num_layers, st);
  }
  const StrategyPlacement gpus = read_placement(r, n["placement"], sc.cluster);
  const Locator at(r, {{"strategy", n}, {"training", training}});
  check_strategy(sc, gpus, at);
  if (n["order"].IsDefined()) {
    read_order(r, n["order"], sc);
    check_order_offload(sc, at);
  }
}

}  // namespace pipesim::internal
