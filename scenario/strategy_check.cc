// The strategy's checks on values (SPEC section 3): what must hold of a Strategy, however it
// was made (read from YAML, or built by the planner or in code), against the model, the
// training settings and the cluster; then the micro-batches and the placement it resolves to.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "scenario/internal/locator.h"
#include "scenario/internal/sections.h"
#include "topology/placement.h"

namespace pipesim::internal {
namespace {

// Ranges the YAML reader checks as it reads; a strategy built in code is held to them here.
void check_ranges(const Strategy& st, const Locator& at) {
  const auto whole = [&](const std::string& key, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      at.fail(key, fmt::format("{} is out of range", v),
              fmt::format("a whole number from {} to {}", lo, hi));
  };
  whole("strategy.data", st.data, 1, 1'000'000);
  whole("strategy.virtual_stages", st.virtual_stages, 1, 64);
  whole("strategy.tensor", st.tensor, 1, 4096);
  whole("strategy.zero", st.zero, 0, 3);
  whole("strategy.context", st.context, 1, 4096);
  whole("strategy.expert", st.expert, 1, 1 << 20);
  whole("strategy.expert_tensor", st.expert_tensor, 1, 4096);
  whole("strategy.recompute_layers", st.recompute_layers, 0, 1'000'000);
  whole("strategy.offload_layers", st.offload_layers, 0, 1'000'000);
  if (st.recompute_modules == 0 || st.recompute_modules >= (1u << kRecomputeModuleCount))
    at.fail("strategy.recompute_modules", "expected a non-empty set of modules",
            "core_attn, layernorm, mlp, moe_act, mla_up_proj, shared_experts, moe, "
            "alternate_gemms");
  // The per-op policy covers the whole layer: another module beside it would run twice.
  const RecomputeModules policy = module_bit(RecomputeModule::kAlternateGemms);
  if ((st.recompute_modules & policy) != 0 && st.recompute_modules != policy)
    at.fail("strategy.recompute_modules",
            "alternate_gemms re-runs the whole layer but its attention kernel: no other module "
            "goes with it",
            "[alternate_gemms] alone, or Megatron-Core's modules");
  for (size_t g = 0; g < st.stages.size(); ++g) {
    const StageSpec& s = st.stages[g];
    whole(fmt::format("strategy.stages.{}.replicas", g), s.replicas, 1, 1'000'000);
    if (s.tensor) whole(fmt::format("strategy.stages.{}.tensor", g), *s.tensor, 1, 4096);
  }
  if (!(st.routing_imbalance >= 1 && st.routing_imbalance <= 1000))
    at.fail("strategy.routing_imbalance", fmt::format("{} is out of range", st.routing_imbalance),
            "a number from 1 to 1000");
  if (st.bucket_bytes < 0)
    at.fail("strategy.bucket", fmt::format("{} B is negative", st.bucket_bytes), "a size >= 0");
}

// Offloading activations (Megatron-Core's CPU offloading) takes the place of a recompute and
// holds a layer's activations until one backward reads them all.
void check_offload(const Scenario& sc, const Locator& at) {
  const Strategy& st = sc.strategy;
  if (st.offload_layers == 0) return;
  bool recomputes = st.recompute != Recompute::kNone;
  for (const StageSpec& s : st.stages)
    recomputes = recomputes || st.recompute_of(s) != Recompute::kNone;
  if (recomputes || st.schedule == ScheduleKind::kGpipeRecompute)
    at.fail("strategy.offload_layers",
            "offloaded activations are not recomputed (Megatron-Core rejects CPU offloading "
            "with a recompute)",
            "recompute: none, or leave offload_layers out");
  if (needs_split_backward(st.schedule))
    at.fail("strategy.offload_layers",
            fmt::format("{} splits the backward; offloaded activations come back for one "
                        "backward step",
                        to_string(st.schedule)),
            "a schedule with one backward step (dapple, 1f1b, interleaved, gpipe, ...), or "
            "leave offload_layers out");
  for (int d = 0; d < sc.cluster.num_devices(); ++d) {
    if (sc.cluster.device(d).gpu.host_bytes_per_s > 0) continue;
    at.fail("strategy.offload_layers",
            fmt::format("GPU {} has no host link (cluster.gpu.host_bandwidth)",
                        sc.cluster.device(d).name),
            "a GPU preset, host_bandwidth on the GPU, or leave offload_layers out");
  }
}

// The options that belong to some schedules or ZeRO stages only.
void check_options(const Scenario& sc, const Locator& at) {
  const Strategy& st = sc.strategy;
  if (st.schedule == ScheduleKind::kZbV && st.virtual_stages != 2)
    at.fail("strategy.virtual_stages",
            fmt::format("zb-v runs two chunks per device, not {}", st.virtual_stages),
            "2, or leave it out");
  if (st.virtual_stages > 1 && st.schedule != ScheduleKind::kInterleaved &&
      st.schedule != ScheduleKind::kZbV)
    at.fail(
        "strategy.virtual_stages",
        fmt::format("{} model chunks per device need an interleaved schedule", st.virtual_stages),
        "1, or schedule: interleaved");
  if (st.vertical_sync && st.schedule != ScheduleKind::kPipeDream)
    at.fail("strategy.vertical_sync", "vertical sync is a PipeDream option", "schedule: pipedream");
  const auto warmup = [&](Warmup w, const std::string& key) {
    if (w != Warmup::kSchedule && !has_warmup(st.schedule))
      at.fail(
          key,
          fmt::format("a warm-up depth is a 1F1B option; {} fixes its own", to_string(st.schedule)),
          "schedule: dapple | 1f1b | pipedream-flush, or warmup: schedule");
  };
  warmup(st.warmup, "strategy.warmup");
  for (size_t g = 0; g < st.stages.size(); ++g)
    if (st.stages[g].warmup)
      warmup(*st.stages[g].warmup, fmt::format("strategy.stages.{}.warmup", g));
  if (st.zero > 0 && is_async(st.schedule))
    at.fail("strategy.zero",
            fmt::format("{} keeps whole weight versions on every replica", to_string(st.schedule)),
            "a synchronous schedule, or zero: 0");
  if (st.overlap_param_gather && st.zero != 1 && st.zero != 2)
    at.fail("strategy.overlap_param_gather",
            fmt::format("only ZeRO-1 and ZeRO-2 gather the updated weights after the step "
                        "(zero: {})",
                        st.zero),
            "zero: 1 or 2, or overlap_param_gather: false");
  if (!st.overlap_grad_reduce && st.zero >= 2)
    at.fail("strategy.overlap_grad_reduce",
            fmt::format("ZeRO-{} reduce-scatters every micro-batch's gradients as the backward "
                        "produces them",
                        st.zero),
            "zero: 0 or 1, or overlap_grad_reduce: true");
  // (Whatever the recompute: the planner's selective plans keep the scenario's modules.)
  if (st.shared_expert_overlap &&
      (st.recompute_modules & module_bit(RecomputeModule::kSharedExperts)) != 0)
    at.fail("strategy.recompute_modules",
            "shared experts overlapped with the token exchange are not recomputed (Megatron-Core "
            "rejects the two together)",
            "leave shared_experts out, or shared_expert_overlap: false");
  check_offload(sc, at);
  if (needs_split_backward(st.schedule)) {
    for (size_t i = 0; i < sc.model.layers.size(); ++i) {
      if (sc.model.layers[i].split_backward) continue;
      at.fail("strategy.schedule",
              fmt::format(
                  "{} needs every layer's backward split, but layer {} ('{}') gives only backward",
                  to_string(st.schedule), i, sc.model.layers[i].name),
              "backward_input and backward_weight on every layer");
    }
  }
}

// Consecutive stages covering every layer once, dealt to devices v chunks each, the chunks
// of one device with equal replicas.
void check_stages(const Scenario& sc, const Locator& at) {
  const Strategy& st = sc.strategy;
  const int num_layers = static_cast<int>(sc.model.layers.size());
  if (st.stages.empty())
    at.fail("strategy.stages", "expected a non-empty list of stages",
            "e.g. '- {layers: 0-3, replicas: 1}'");
  int expect = 0;
  for (size_t i = 0; i < st.stages.size(); ++i) {
    const StageSpec& s = st.stages[i];
    const std::string key = fmt::format("strategy.stages.{}.layers", i);
    if (s.first_layer > s.last_layer || s.last_layer >= num_layers)
      at.fail(key,
              fmt::format("range '{}-{}' is not within the model", s.first_layer, s.last_layer),
              fmt::format("'first-last' or one index, within 0-{}", num_layers - 1));
    if (s.first_layer != expect)
      at.fail(key,
              i == 0 ? fmt::format("the first stage starts at layer {}", s.first_layer)
                     : fmt::format("starts at layer {} but the previous stage ended at layer {}",
                                   s.first_layer, expect - 1),
              fmt::format("consecutive ranges covering layers 0-{} exactly once", num_layers - 1));
    expect = s.last_layer + 1;
  }
  if (expect != num_layers)
    at.fail("strategy.stages",
            fmt::format("the stages end at layer {} but the model has layers 0-{}", expect - 1,
                        num_layers - 1),
            "consecutive ranges covering every layer exactly once");
  const int count = static_cast<int>(st.stages.size());
  const int v = st.virtual_stages;
  if (count % v != 0)
    at.fail("strategy.stages",
            fmt::format("{} stages cannot be dealt to devices as {} chunks each", count, v),
            "a multiple of strategy.virtual_stages");
  for (int g = count / v; g < count; ++g) {
    const int p = st.position_of(g);
    if (st.stages[static_cast<size_t>(g)].replicas != st.stages[static_cast<size_t>(p)].replicas)
      at.fail_at(fmt::format("strategy.stages.{}", g),
                 fmt::format("strategy.stages.{}.replicas", g),
                 fmt::format("stage {} shares devices with stage {} and needs its {} replicas", g,
                             p, st.stages[static_cast<size_t>(p)].replicas),
                 "equal replicas for the chunks of one device");
  }
}

// Tensor parallelism splits only layers whose operators pipesim knows (generated
// transformer layers, shape-described linear, conv, pool, attention and lstm layers);
// sequence parallelism only transformer layers; the chunks of one device share its tensor
// group; sequence parallelism needs a tensor group.
void check_tensor(const Scenario& sc, const Locator& at) {
  const Strategy& st = sc.strategy;
  bool any = false;
  for (size_t g = 0; g < st.stages.size(); ++g) {
    const StageSpec& s = st.stages[g];
    const int t = st.tensor_of(s);
    const std::string key =
        s.tensor ? fmt::format("strategy.stages.{}.tensor", g) : "strategy.tensor";
    if (t == 1) continue;
    any = true;
    for (int l = s.first_layer; l <= s.last_layer; ++l) {
      const Layer& x = sc.model.layers[static_cast<size_t>(l)];
      if (!x.tensor_parallel && !x.tensor_split)
        at.fail(key,
                fmt::format("layer {} ('{}') has no operator layout to split {} ways ({} costs)", l,
                            x.name, t, x.source),
                "tensor: 1 for measured or hand-written layers, bottlenecks, AmoebaNet cells and "
                "embeddings; transformer, linear, conv, pool, attention and lstm layers split");
      if (st.sequence_parallel && x.tensor_split)
        at.fail("strategy.sequence_parallel",
                fmt::format("sequence parallelism splits transformer layers' layer norms and "
                            "dropouts; layer {} ('{}') on a stage of tensor {} is shape-described",
                            l, x.name, t),
                "sequence_parallel: false, or tensor: 1 on stages of shape-described layers");
    }
    const int p = st.position_of(static_cast<int>(g));
    if (t != st.tensor_of(st.stages[static_cast<size_t>(p)]))
      at.fail(
          key,
          fmt::format("stage {} shares devices with stage {} and needs its tensor degree", g, p),
          "equal tensor for the chunks of one device");
  }
  if (st.sequence_parallel && !any)
    at.fail("strategy.sequence_parallel",
            "sequence parallelism splits along the tensor group, and every stage has tensor 1",
            "tensor > 1, or sequence_parallel: false");
}

// strategy.context, expert, expert_tensor (SPEC section 9) against the model and the layout.
void check_context_and_experts(const Scenario& sc, const Locator& at) {
  const Strategy& st = sc.strategy;
  const std::vector<Layer>& layers = sc.model.layers;
  const auto moe =
      std::find_if(layers.begin(), layers.end(), [](const Layer& l) { return l.moe.has_value(); });
  if (st.expert_tensor > 1 && moe == layers.end())
    at.fail("strategy.expert_tensor", "the model has no mixture-of-experts layers",
            "1, or a model with experts: E");
  if (st.expert_tensor > 1 && moe->moe->expert_ffn % st.expert_tensor != 0)
    at.fail("strategy.expert_tensor",
            fmt::format("an expert {} wide does not split into {} equal column blocks",
                        moe->moe->expert_ffn, st.expert_tensor),
            "a divisor of the experts' width (model.expert_ffn)");
  if (st.context > 1) {
    const bool attention = std::any_of(layers.begin(), layers.end(),
                                       [](const Layer& l) { return l.attention.has_value(); });
    if (!attention)
      at.fail("strategy.context",
              "context parallelism splits a transformer's sequences, and this model has no "
              "generated transformer layers",
              "1, or a model with generator: transformer");
    const int64_t s = sc.model.tokens_per_sample;
    if (s % (2 * st.context) != 0)
      at.fail("strategy.context",
              fmt::format("a sequence of {} tokens does not split into 2 x {} equal chunks "
                          "(causal load balancing)",
                          s, st.context),
              "a context degree c with sequence divisible by 2c");
  }
  if (st.expert > 1 || st.expert_tensor > 1) {
    if (st.expert > 1 && moe == layers.end())
      at.fail("strategy.expert", "the model has no mixture-of-experts layers",
              "1, or a model with experts: E");
    if (moe->moe->experts % st.expert != 0)
      at.fail("strategy.expert",
              fmt::format("{} experts do not spread evenly over {} expert ranks", moe->moe->experts,
                          st.expert),
              "a divisor of model.experts");
    // Megatron-Core folds expert x expert-tensor ranks out of tensor x context x data.
    const int ranks = st.expert * st.expert_tensor;
    for (const StageSpec& g : st.stages) {
      const int t = st.tensor_of(g);
      if ((st.copies() * t) % ranks == 0) continue;
      const bool etp = st.expert_tensor > 1;
      at.fail(etp ? "strategy.expert_tensor" : "strategy.expert",
              fmt::format("expert{} ranks are carved out of the tensor x data x context ranks "
                          "({} x {} x {}), which {}{} does not divide",
                          etp ? " x expert-tensor" : "", t, st.data, st.context, st.expert,
                          etp ? fmt::format(" x {}", st.expert_tensor) : ""),
              etp ? "expert x expert_tensor dividing tensor x data x context"
                  : "a divisor of tensor x data x context");
    }
    if (st.zero >= 2)
      at.fail("strategy.zero",
              fmt::format("ZeRO-{} with expert parallelism is not modelled", st.zero),
              "zero: 0 or 1 (Megatron-Core's distributed optimizer)");
  }
  if (st.context > 1 || st.expert > 1 || st.expert_tensor > 1) {
    for (size_t g = 0; g < st.stages.size(); ++g) {
      if (st.stages[g].replicas == 1) continue;
      at.fail_at("strategy.stages", fmt::format("strategy.stages.{}.replicas", g),
                 "replicated stages do not combine with context or expert parallelism",
                 "replicas: 1 (data: N for data parallelism)");
    }
  }
  if (moe != layers.end()) {
    for (const StageSpec& g : st.stages) {
      if (st.tensor_of(g) > 1 && !st.sequence_parallel)
        at.fail_at(at.given("strategy.tensor") ? "strategy.tensor" : "strategy",
                   "strategy.sequence_parallel",
                   "mixture-of-experts layers under tensor parallelism need sequence parallelism "
                   "(Megatron-Core's token dispatch takes each rank's sequence shard)",
                   "sequence_parallel: true");
    }
  }
}

// Micro-batches: SPEC M = global_batch / (micro_batch x data), a whole number; a replicated
// stage splits each micro-batch into whole samples, one share per replica (PipeDream's
// round-robin replicas take whole micro-batches instead); interleaving deals M over the
// pipeline.
void count_micro_batches(Scenario& sc, const Locator& at) {
  const Strategy& st = sc.strategy;
  const Training& t = sc.training;
  const int64_t per = t.micro_batch * st.data;
  if (t.global_batch % per != 0)
    throw InputError(
        fmt::format("global_batch {} is not a multiple of micro_batch x data = {} x {} = {}",
                    t.global_batch, t.micro_batch, st.data, per),
        "global_batch divisible by micro_batch x strategy.data", "training.global_batch",
        at.where("training.global_batch", "training.global_batch"));
  sc.micro_batches = t.global_batch / per;
  if (st.schedule != ScheduleKind::kPipeDream) {
    for (size_t g = 0; g < st.stages.size(); ++g) {
      if (st.stages[g].replicas <= t.micro_batch) continue;
      at.fail(fmt::format("strategy.stages.{}.replicas", g),
              fmt::format("{} replicas cannot split a micro-batch of {} sample{}",
                          st.stages[g].replicas, t.micro_batch, t.micro_batch == 1 ? "" : "s"),
              fmt::format("at most training.micro_batch = {} replicas per stage", t.micro_batch));
    }
  }
  const int P = st.positions();
  if (st.schedule == ScheduleKind::kInterleaved && sc.micro_batches % P != 0)
    at.fail("strategy.schedule",
            fmt::format("interleaved needs the micro-batches per iteration (M = {}) to be a "
                        "multiple of the pipeline depth ({})",
                        sc.micro_batches, P),
            "global_batch / (micro_batch x data) divisible by the number of devices in the "
            "pipeline");
}

// GPUs per position: replicas x tensor, replica-major.
std::vector<int> position_gpus(const Strategy& st) {
  std::vector<int> reps;
  for (int p = 0; p < st.positions(); ++p) {
    const StageSpec& s = st.stages[static_cast<size_t>(p)];
    reps.push_back(s.replicas * st.tensor_of(s));
  }
  return reps;
}

// Explicit device lists: one per stage (data copies one after another, and each copy's
// context ranks), each device at most once.
void place_lists(Scenario& sc, const StrategyPlacement& gpus, const Locator& at) {
  const Strategy& st = sc.strategy;
  const std::vector<int> reps = position_gpus(st);
  const size_t lists = static_cast<size_t>(st.copies()) * reps.size();
  if (gpus.lists.size() != lists)
    at.fail("strategy.placement",
            fmt::format("expected {} device lists, got {}", lists, gpus.lists.size()),
            fmt::format("fresh-first | append-first | scatter-first, or {} lists of device names "
                        "({}stages)",
                        lists, st.context > 1 ? "data x context x " : "data x "));
  sc.explicit_placement = true;
  std::set<int> used;
  sc.placement.assign(static_cast<size_t>(st.copies()), {});
  for (size_t i = 0; i < lists; ++i) {
    const std::string key = fmt::format("strategy.placement.{}", i);
    const std::vector<int>& list = gpus.lists[i];
    const int want = reps[i % reps.size()];
    if (static_cast<int>(list.size()) != want) {
      const StageSpec& stage = st.stages[i % reps.size()];
      at.fail(key,
              st.tensor_of(stage) == 1
                  ? fmt::format("stage {} has {} replica{} and needs that many devices",
                                i % reps.size(), want, want == 1 ? "" : "s")
                  : fmt::format("stage {} has {} replica{} of {} tensor ranks and needs {} devices",
                                i % reps.size(), stage.replicas, stage.replicas == 1 ? "" : "s",
                                st.tensor_of(stage), want),
              "a list of device names or indices, replica by replica, rank by rank");
    }
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string rank = fmt::format("{}.{}", key, k);
      const int d = list[k];
      if (d < 0 || d >= sc.cluster.num_devices())
        at.fail(rank, fmt::format("no device {}", d),
                fmt::format("a device name or an index 0-{}", sc.cluster.num_devices() - 1));
      if (!used.insert(d).second)
        at.fail(rank, fmt::format("device '{}' is given two stages", sc.cluster.device(d).name),
                "each device at most once");
    }
    sc.placement[i / reps.size()].push_back(list);
  }
}

}  // namespace

void check_order_offload(const Scenario& sc, const Locator& at) {
  if (sc.strategy.offload_layers == 0) return;
  // A hand-written order's own R or W steps would read the moved activations again.
  for (const StepList& list : sc.user_order) {
    for (const Step& step : list) {
      if (step.kind != OpKind::kRecompute && step.kind != OpKind::kWeightGrad) continue;
      at.fail("strategy.offload_layers",
              fmt::format("strategy.order has {} steps; offloaded activations come back for "
                          "one backward step",
                          step.kind == OpKind::kRecompute ? "R" : "W"),
              "an order of F and B steps, or leave offload_layers out");
    }
  }
}

void check_strategy(Scenario& sc, const StrategyPlacement& gpus, const Locator& at) {
  check_ranges(sc.strategy, at);
  check_options(sc, at);
  check_stages(sc, at);
  check_tensor(sc, at);
  check_context_and_experts(sc, at);
  count_micro_batches(sc, at);
  sc.placement_policy = gpus.policy;
  sc.explicit_placement = false;
  if (gpus.given_lists) {
    place_lists(sc, gpus, at);
    return;
  }
  const Strategy& st = sc.strategy;
  std::vector<int> groups;  // tensor groups stay inside one server when they fit
  for (int p = 0; p < st.positions(); ++p)
    groups.push_back(st.tensor_of(st.stages[static_cast<size_t>(p)]));
  const std::vector<int> reps = position_gpus(st);
  try {
    sc.placement = st.context == 1 && st.expert == 1 && st.expert_tensor == 1
                       ? place(sc.cluster, reps, st.data, sc.placement_policy, groups)
                       : place_rank_ordered(sc.cluster, reps, st.copies(), st.context,
                                            sc.placement_policy, groups);
  } catch (InputError& e) {
    e.set_key_if_empty("strategy.placement");
    e.set_location_if_empty(at.where(
        at.given("strategy.placement") ? "strategy.placement" : "strategy", "strategy.placement"));
    throw;
  }
}

}  // namespace pipesim::internal
