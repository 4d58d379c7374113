// The strategy section: schedule, stages, data parallelism, a hand-written order and the
// placement of every stage replica on the cluster's devices.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <set>
#include <sstream>

#include "core/error.h"
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

// strategy.warmup or a stage's warmup: schedule | deep | auto, for the 1F1B schedules.
Warmup read_warmup(const Reader& r, const YAML::Node& n, const std::string& path,
                   const Strategy& st) {
  const Warmup w = r.choice<Warmup>(
      n, path, {{"schedule", Warmup::kSchedule}, {"deep", Warmup::kDeep}, {"auto", Warmup::kAuto}});
  if (w != Warmup::kSchedule && !has_warmup(st.schedule))
    r.fail(
        n, path,
        fmt::format("a warm-up depth is a 1F1B option; {} fixes its own", to_string(st.schedule)),
        "schedule: dapple | 1f1b | pipedream-flush, or warmup: schedule");
  return w;
}

// strategy.recompute or a stage's recompute: none | full | selective, in any schedule
// (PipeDream and 2BW re-run the forward with the weights they stashed for it);
// gpipe-recompute already means full everywhere.
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

// Tensor parallelism splits only layers whose operators pipesim knows (generated
// transformer layers, shape-described linear, conv, pool, attention and lstm layers);
// sequence parallelism only transformer layers; the chunks of one device share its tensor group;
// sequence parallelism needs a tensor group.
void check_tensor(const Reader& r, const YAML::Node& n, bool has_stages, const Scenario& sc) {
  const Strategy& st = sc.strategy;
  bool any = false;
  for (size_t g = 0; g < st.stages.size(); ++g) {
    const StageSpec& s = st.stages[g];
    const int t = st.tensor_of(s);
    const YAML::Node at = has_stages && s.tensor ? n["stages"][g]["tensor"] : n["tensor"];
    const std::string path =
        has_stages && s.tensor ? fmt::format("strategy.stages.{}.tensor", g) : "strategy.tensor";
    if (t == 1) continue;
    any = true;
    for (int l = s.first_layer; l <= s.last_layer; ++l) {
      const Layer& x = sc.model.layers[static_cast<size_t>(l)];
      if (!x.tensor_parallel && !x.tensor_split)
        r.fail(at, path,
               fmt::format("layer {} ('{}') has no operator layout to split {} ways ({} costs)", l,
                           x.name, t, x.source),
               "tensor: 1 for measured or hand-written layers, bottlenecks, AmoebaNet cells and "
               "embeddings; transformer, linear, conv, pool, attention and lstm layers split");
      if (st.sequence_parallel && x.tensor_split)
        r.fail(n["sequence_parallel"], "strategy.sequence_parallel",
               fmt::format("sequence parallelism splits transformer layers' layer norms and "
                           "dropouts; layer {} ('{}') on a stage of tensor {} is shape-described",
                           l, x.name, t),
               "sequence_parallel: false, or tensor: 1 on stages of shape-described layers");
    }
    const int p = st.position_of(static_cast<int>(g));
    if (t != st.tensor_of(st.stages[static_cast<size_t>(p)]))
      r.fail(at, path,
             fmt::format("stage {} shares devices with stage {} and needs its tensor degree", g, p),
             "equal tensor for the chunks of one device");
  }
  if (st.sequence_parallel && !any)
    r.fail(n["sequence_parallel"], "strategy.sequence_parallel",
           "sequence parallelism splits along the tensor group, and every stage has tensor 1",
           "tensor > 1, or sequence_parallel: false");
}

// strategy.context, context_comm, expert, expert_tensor, routing_imbalance (SPEC section 9).
void read_context_and_experts(const Reader& r, const YAML::Node& n, Scenario& sc) {
  Strategy& st = sc.strategy;
  const std::vector<Layer>& layers = sc.model.layers;
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
  if (n["expert_tensor"].IsDefined()) {
    st.expert_tensor =
        static_cast<int>(r.integer(n["expert_tensor"], "strategy.expert_tensor", 1, 4096));
    if (st.expert_tensor != 1)
      r.fail(n["expert_tensor"], "strategy.expert_tensor",
             fmt::format("experts split over {} tensor ranks are not modelled; each expert runs "
                         "whole on one GPU",
                         st.expert_tensor),
             "1");
  }
  if (n["expert_dispatch"].IsDefined())
    st.dedup_dispatch = r.choice<int>(n["expert_dispatch"], "strategy.expert_dispatch",
                                      {{"alltoall", 0}, {"flex", 1}}) == 1;
  if (n["routing_imbalance"].IsDefined())
    st.routing_imbalance = r.real(n["routing_imbalance"], "strategy.routing_imbalance", 1, 1000);
  const auto moe = std::find_if(layers.begin(), layers.end(),
                                [](const Layer& l) { return l.moe.has_value(); });
  if (st.context > 1) {
    const bool attention = std::any_of(layers.begin(), layers.end(),
                                       [](const Layer& l) { return l.attention.has_value(); });
    if (!attention)
      r.fail(n["context"], "strategy.context",
             "context parallelism splits a transformer's sequences, and this model has no "
             "generated transformer layers",
             "1, or a model with generator: transformer");
    const int64_t s = sc.model.tokens_per_sample;
    if (s % (2 * st.context) != 0)
      r.fail(n["context"], "strategy.context",
             fmt::format("a sequence of {} tokens does not split into 2 x {} equal chunks (causal "
                         "load balancing)",
                         s, st.context),
             "a context degree c with sequence divisible by 2c");
  }
  if (st.expert > 1) {
    if (moe == layers.end())
      r.fail(n["expert"], "strategy.expert", "the model has no mixture-of-experts layers",
             "1, or a model with experts: E");
    if (moe->moe->experts % st.expert != 0)
      r.fail(n["expert"], "strategy.expert",
             fmt::format("{} experts do not spread evenly over {} expert ranks", moe->moe->experts,
                         st.expert),
             "a divisor of model.experts");
    // Megatron-Core folds expert ranks out of tensor x context x data (expert_tensor 1).
    for (const StageSpec& g : st.stages) {
      const int t = st.tensor_of(g);
      if ((st.copies() * t) % st.expert != 0)
        r.fail(n["expert"], "strategy.expert",
               fmt::format("expert ranks are carved out of the tensor x data x context ranks "
                           "({} x {} x {}), which {} does not divide",
                           t, st.data, st.context, st.expert),
               "a divisor of tensor x data x context");
    }
    if (st.zero >= 2)
      r.fail(n["zero"], "strategy.zero",
             fmt::format("ZeRO-{} with expert parallelism is not modelled", st.zero),
             "zero: 0 or 1 (Megatron-Core's distributed optimizer)");
  }
  if (st.context > 1 || st.expert > 1) {
    for (size_t g = 0; g < st.stages.size(); ++g) {
      if (st.stages[g].replicas == 1) continue;
      r.fail(n["stages"], fmt::format("strategy.stages.{}.replicas", g),
             "replicated stages do not combine with context or expert parallelism",
             "replicas: 1 (data: N for data parallelism)");
    }
  }
  if (moe != layers.end()) {
    for (const StageSpec& g : st.stages) {
      if (st.tensor_of(g) > 1 && !st.sequence_parallel)
        r.fail(n["tensor"].IsDefined() ? n["tensor"] : n, "strategy.sequence_parallel",
               "mixture-of-experts layers under tensor parallelism need sequence parallelism "
               "(Megatron-Core's token dispatch takes each rank's sequence shard)",
               "sequence_parallel: true");
    }
  }
}

}  // namespace

void read_strategy(const Reader& r, const YAML::Node& n, const YAML::Node& training, Scenario& sc) {
  r.expect_map(n, "strategy",
               {"schedule", "stages", "pipeline", "data", "virtual_stages", "placement", "order",
                "vertical_sync", "allreduce", "bucket", "bucket_buffers", "warmup", "recompute",
                "tensor", "sequence_parallel", "tensor_overlap", "p2p_overlap", "zero",
                "overlap_param_gather", "overlap_grad_reduce", "context", "context_comm", "expert", "expert_tensor",
                "routing_imbalance", "expert_dispatch"});
  Strategy& st = sc.strategy;
  const int num_layers = static_cast<int>(sc.model.layers.size());
  {
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
    st.schedule = *kind;
  }
  if (n["virtual_stages"].IsDefined()) {
    st.virtual_stages =
        static_cast<int>(r.integer(n["virtual_stages"], "strategy.virtual_stages", 1, 64));
    if (st.schedule == ScheduleKind::kZbV && st.virtual_stages != 2) {
      r.fail(n["virtual_stages"], "strategy.virtual_stages",
             fmt::format("zb-v runs two chunks per device, not {}", st.virtual_stages),
             "2, or leave it out");
    }
    if (st.virtual_stages > 1 && st.schedule != ScheduleKind::kInterleaved &&
        st.schedule != ScheduleKind::kZbV) {
      r.fail(
          n["virtual_stages"], "strategy.virtual_stages",
          fmt::format("{} model chunks per device need an interleaved schedule", st.virtual_stages),
          "1, or schedule: interleaved");
    }
  }
  if (st.schedule == ScheduleKind::kZbV) st.virtual_stages = 2;  // the V's two chunks
  const int v = st.virtual_stages;
  if (n["allreduce"].IsDefined()) {
    const auto a = r.choice<int>(n["allreduce"], "strategy.allreduce",
                                 {{"ring", 0}, {"tree", 1}, {"hierarchical", 2}, {"auto", 3}});
    if (a < 3) st.allreduce = static_cast<AllReduceAlgo>(a);
  }
  if (n["bucket"].IsDefined()) st.bucket_bytes = r.bytes(n["bucket"], "strategy.bucket");
  st.bucket_buffers = read_flag(r, n["bucket_buffers"], "strategy.bucket_buffers", false);
  if (n["vertical_sync"].IsDefined()) {
    st.vertical_sync = read_flag(r, n["vertical_sync"], "strategy.vertical_sync", false);
    if (st.vertical_sync && st.schedule != ScheduleKind::kPipeDream) {
      r.fail(n["vertical_sync"], "strategy.vertical_sync", "vertical sync is a PipeDream option",
             "schedule: pipedream");
    }
  }
  if (n["warmup"].IsDefined()) st.warmup = read_warmup(r, n["warmup"], "strategy.warmup", st);
  if (n["recompute"].IsDefined())
    st.recompute = read_recompute(r, n["recompute"], "strategy.recompute", st);
  if (n["tensor"].IsDefined())
    st.tensor = static_cast<int>(r.integer(n["tensor"], "strategy.tensor", 1, 4096));
  st.sequence_parallel = read_flag(r, n["sequence_parallel"], "strategy.sequence_parallel", false);
  if (n["tensor_overlap"].IsDefined()) {
    st.tensor_overlap = r.choice<int>(n["tensor_overlap"], "strategy.tensor_overlap",
                                      {{"none", 0}, {"backward", 1}}) == 1;
  }
  st.p2p_overlap = read_flag(r, n["p2p_overlap"], "strategy.p2p_overlap", true);
  if (n["zero"].IsDefined()) {
    // With no data-parallel ranks to shard over, a ZeRO stage is accepted and changes
    // nothing (the report says so), as DeepSpeed runs it on one rank.
    st.zero = static_cast<int>(r.integer(n["zero"], "strategy.zero", 0, 3));
    if (st.zero > 0 && is_async(st.schedule))
      r.fail(n["zero"], "strategy.zero",
             fmt::format("{} keeps whole weight versions on every replica", to_string(st.schedule)),
             "a synchronous schedule, or zero: 0");
  }
  st.overlap_param_gather =
      read_flag(r, n["overlap_param_gather"], "strategy.overlap_param_gather", false);
  if (st.overlap_param_gather && st.zero != 1 && st.zero != 2) {
    r.fail(n["overlap_param_gather"], "strategy.overlap_param_gather",
           fmt::format("only ZeRO-1 and ZeRO-2 gather the updated weights after the step "
                       "(zero: {})",
                       st.zero),
           "zero: 1 or 2, or overlap_param_gather: false");
  }
  st.overlap_grad_reduce =
      read_flag(r, n["overlap_grad_reduce"], "strategy.overlap_grad_reduce", true);
  if (!st.overlap_grad_reduce && st.zero >= 2) {
    r.fail(n["overlap_grad_reduce"], "strategy.overlap_grad_reduce",
           fmt::format("ZeRO-{} reduce-scatters every micro-batch's gradients as the backward "
                       "produces them",
                       st.zero),
           "zero: 0 or 1, or overlap_grad_reduce: true");
  }
  if (needs_split_backward(st.schedule)) {
    for (size_t i = 0; i < sc.model.layers.size(); ++i) {
      if (sc.model.layers[i].split_backward) continue;
      r.fail(n["schedule"], "strategy.schedule",
             fmt::format(
                 "{} needs every layer's backward split, but layer {} ('{}') gives only backward",
                 to_string(st.schedule), i, sc.model.layers[i].name),
             "backward_input and backward_weight on every layer");
    }
  }
  st.data = n["data"].IsDefined()
                ? static_cast<int>(r.integer(n["data"], "strategy.data", 1, 1'000'000))
                : 1;
  const bool has_stages = n["stages"].IsDefined();
  const bool has_pipeline = n["pipeline"].IsDefined();
  if (has_stages == has_pipeline) {
    r.fail(has_stages ? n["pipeline"] : n, "strategy.stages",
           has_stages ? "give stages or pipeline, not both" : "missing required key",
           "'stages: [{layers: 0-3, replicas: 1}, ...]' or 'pipeline: N'");
  }
  if (has_pipeline) {
    const int p = static_cast<int>(r.integer(n["pipeline"], "strategy.pipeline", 1, 1'000'000));
    if (int64_t{p} * v > num_layers)
      r.fail(n["pipeline"], "strategy.pipeline",
             v == 1 ? fmt::format("{} stages but the model has {} layers", p, num_layers)
                    : fmt::format("{} x {} chunks but the model has {} layers", p, v, num_layers),
             "at most one stage per layer");
    st.stages = even_partition(sc.model, p * v);
  } else {
    const YAML::Node stages = n["stages"];
    if (!stages.IsSequence() || stages.size() == 0)
      r.fail(stages, "strategy.stages", "expected a non-empty list of stages",
             "e.g. '- {layers: 0-3, replicas: 1}'");
    int expect = 0;
    for (size_t i = 0; i < stages.size(); ++i) {
      const std::string p = fmt::format("strategy.stages.{}", i);
      const YAML::Node s = stages[i];
      r.expect_map(s, p, {"layers", "replicas", "warmup", "recompute", "tensor"});
      const auto [first, last] =
          read_range(r, r.require(s, p, "layers"), p + ".layers", num_layers);
      if (first != expect) {
        r.fail(s["layers"], p + ".layers",
               i == 0 ? fmt::format("the first stage starts at layer {}", first)
                      : fmt::format("starts at layer {} but the previous stage ended at layer {}",
                                    first, expect - 1),
               fmt::format("consecutive ranges covering layers 0-{} exactly once", num_layers - 1));
      }
      expect = last + 1;
      const int rep =
          s["replicas"].IsDefined()
              ? static_cast<int>(r.integer(s["replicas"], p + ".replicas", 1, 1'000'000))
              : 1;
      st.stages.push_back({first, last, rep, std::nullopt});
      if (s["warmup"].IsDefined())
        st.stages.back().warmup = read_warmup(r, s["warmup"], p + ".warmup", st);
      if (s["recompute"].IsDefined())
        st.stages.back().recompute = read_recompute(r, s["recompute"], p + ".recompute", st);
      if (s["tensor"].IsDefined())
        st.stages.back().tensor = static_cast<int>(r.integer(s["tensor"], p + ".tensor", 1, 4096));
    }
    if (expect != num_layers) {
      r.fail(stages, "strategy.stages",
             fmt::format("the stages end at layer {} but the model has layers 0-{}", expect - 1,
                         num_layers - 1),
             "consecutive ranges covering every layer exactly once");
    }
    const int count = static_cast<int>(st.stages.size());
    if (count % v != 0) {
      r.fail(stages, "strategy.stages",
             fmt::format("{} stages cannot be dealt to devices as {} chunks each", count, v),
             "a multiple of strategy.virtual_stages");
    }
    for (int g = count / v; g < count; ++g) {
      const int p = st.position_of(g);
      if (st.stages[static_cast<size_t>(g)].replicas !=
          st.stages[static_cast<size_t>(p)].replicas) {
        r.fail(stages[static_cast<size_t>(g)], fmt::format("strategy.stages.{}.replicas", g),
               fmt::format("stage {} shares devices with stage {} and needs its {} replicas", g, p,
                           st.stages[static_cast<size_t>(p)].replicas),
               "equal replicas for the chunks of one device");
      }
    }
  }
  check_tensor(r, n, has_stages, sc);
  read_context_and_experts(r, n, sc);
  // Micro-batches: SPEC M = global_batch / (micro_batch x data), a whole number.
  const Training& t = sc.training;
  const int64_t per = t.micro_batch * st.data;
  if (t.global_batch % per != 0) {
    throw InputError(
        fmt::format("global_batch {} is not a multiple of micro_batch x data = {} x {} = {}",
                    t.global_batch, t.micro_batch, st.data, per),
        "global_batch divisible by micro_batch x strategy.data", "training.global_batch",
        r.where(training["global_batch"], "training.global_batch"));
  }
  sc.micro_batches = t.global_batch / per;
  const int P = st.positions();
  // A replicated stage splits each micro-batch into whole samples, one share per replica
  // (PipeDream's round-robin replicas take whole micro-batches instead).
  if (st.schedule != ScheduleKind::kPipeDream) {
    for (size_t g = 0; g < st.stages.size(); ++g) {
      if (st.stages[g].replicas <= t.micro_batch) continue;
      const YAML::Node at = has_stages ? n["stages"][g]["replicas"] : n["pipeline"];
      r.fail(at, has_stages ? fmt::format("strategy.stages.{}.replicas", g) : "strategy.stages",
             fmt::format("{} replicas cannot split a micro-batch of {} sample{}",
                         st.stages[g].replicas, t.micro_batch, t.micro_batch == 1 ? "" : "s"),
             fmt::format("at most training.micro_batch = {} replicas per stage", t.micro_batch));
    }
  }
  if (st.schedule == ScheduleKind::kInterleaved && sc.micro_batches % P != 0) {
    r.fail(
        n["schedule"], "strategy.schedule",
        fmt::format(
            "interleaved needs the micro-batches per iteration (M = {}) to be a multiple of the "
            "pipeline depth ({})",
            sc.micro_batches, P),
        "global_batch / (micro_batch x data) divisible by the number of devices in the pipeline");
  }
  // The run's size is checked once the strategy is read (scenario/work_estimate.h).

  if (n["order"].IsDefined()) read_order(r, n["order"], sc);
  std::vector<int> reps;  // GPUs per position: replicas x tensor, replica-major
  for (int p = 0; p < P; ++p) {
    const StageSpec& s = st.stages[static_cast<size_t>(p)];
    reps.push_back(s.replicas * st.tensor_of(s));
  }
  const YAML::Node pl = n["placement"];
  if (!pl.IsDefined() || pl.IsScalar()) {
    if (pl.IsDefined()) {
      sc.placement_policy =
          r.choice<PlacementPolicy>(pl, "strategy.placement",
                                    {{"fresh-first", PlacementPolicy::kFreshFirst},
                                     {"append-first", PlacementPolicy::kAppendFirst},
                                     {"scatter-first", PlacementPolicy::kScatterFirst}});
    }
    std::vector<int> groups;  // tensor groups stay inside one server when they fit
    for (int p = 0; p < P; ++p) groups.push_back(st.tensor_of(st.stages[static_cast<size_t>(p)]));
    sc.placement = r.at(pl.IsDefined() ? pl : n, "strategy.placement", [&] {
      if (st.context == 1 && st.expert == 1)
        return place(sc.cluster, reps, st.data, sc.placement_policy, groups);
      return place_rank_ordered(sc.cluster, reps, st.copies(), st.context, sc.placement_policy,
                                groups);
    });
    return;
  }
  // Explicit device lists: one per stage (data copies one after another, and each copy's
  // context ranks), by name or index.
  const size_t lists = static_cast<size_t>(st.copies()) * reps.size();
  const std::string allowed = fmt::format(
      "fresh-first | append-first | scatter-first, or {} lists of device names ({}stages)", lists,
      st.context > 1 ? "data x context x " : "data x ");
  if (!pl.IsSequence() || pl.size() != lists) {
    r.fail(pl, "strategy.placement",
           fmt::format("expected {} device lists, got {}", lists, pl.IsSequence() ? pl.size() : 0),
           allowed);
  }
  sc.explicit_placement = true;
  std::set<int> used;
  sc.placement.assign(static_cast<size_t>(st.copies()), {});
  for (size_t i = 0; i < pl.size(); ++i) {
    const std::string p = fmt::format("strategy.placement.{}", i);
    const YAML::Node list = pl[i];
    const int want = reps[i % reps.size()];
    if (!list.IsSequence() || static_cast<int>(list.size()) != want) {
      const StageSpec& stage = st.stages[i % reps.size()];
      r.fail(list, p,
             st.tensor_of(stage) == 1
                 ? fmt::format("stage {} has {} replica{} and needs that many devices",
                               i % reps.size(), want, want == 1 ? "" : "s")
                 : fmt::format("stage {} has {} replica{} of {} tensor ranks and needs {} devices",
                               i % reps.size(), stage.replicas, stage.replicas == 1 ? "" : "s",
                               st.tensor_of(stage), want),
             "a list of device names or indices, replica by replica, rank by rank");
    }
    std::vector<int> devs;
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string pk = fmt::format("{}.{}", p, k);
      const std::string name = r.scalar(list[k], pk);
      int d = sc.cluster.device_index(name);
      if (d < 0) {
        int idx = -1;
        const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), idx);
        if (ec == std::errc() && ptr == name.data() + name.size() && idx >= 0 &&
            idx < sc.cluster.num_devices())
          d = idx;
      }
      if (d < 0)
        r.fail(list[k], pk, fmt::format("no device '{}'", name),
               fmt::format("a device name or an index 0-{}", sc.cluster.num_devices() - 1));
      if (!used.insert(d).second)
        r.fail(list[k], pk,
               fmt::format("device '{}' is given two stages", sc.cluster.device(d).name),
               "each device at most once");
      devs.push_back(d);
    }
    sc.placement[i / reps.size()].push_back(std::move(devs));
  }
}

}  // namespace pipesim::internal
