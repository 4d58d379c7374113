// Per-stage costs summed from the layers of each global stage (schedules/lower.h).
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/checked.h"
#include "schedules/lower.h"

namespace pipesim {

namespace {

// Megatron-LM's all-reduces of a generated transformer layer, and the weight-gradient
// GEMMs that may run beside them (none in the forward).
std::vector<TpCollective> allreduces(int n, int64_t bytes, const std::vector<Time>& beside = {}) {
  if (bytes == 0) return {};
  std::vector<TpCollective> out(static_cast<size_t>(n),
                                TpCollective{TpCollective::Kind::kAllReduce, bytes, Time::zero()});
  for (size_t q = 0; q < out.size() && q < beside.size(); ++q) out[q].beside = beside[q];
  return out;
}

// The layer as stage_profiles sees it at tensor degree t: a shape-described layer's times
// become t x one rank's (the lowering divides by t), its activations t x one rank's split
// share plus the replicated part. (What stage_profiles reads; shape-described layers have
// no attention core and no Megatron all-reduces.)
Layer sharded(const Layer& layer, const TensorShard& s, int t) {
  Layer x;
  x.optimizer = layer.optimizer;
  x.params = layer.params;
  x.output_bytes = layer.output_bytes;
  const char* what = "a tensor-parallel layer's costs";
  x.forward = checked_mul(s.forward, t, what);
  x.backward_input = checked_mul(s.backward_input, t, what);
  x.backward_weight = checked_mul(s.backward_weight, t, what);
  x.activation_bytes =
      checked_add(checked_mul(s.split_activation, int64_t{t}, what), s.replicated_activation, what);
  x.tp_replicated_activation = s.replicated_activation;
  if (layer.weight_activation && layer.activation_bytes > 0) {
    // What W reads, as the same share of one rank's activations as of the whole layer's.
    const double share =
        static_cast<double>(layer.weight_kept()) / static_cast<double>(layer.activation_bytes);
    // share <= 1, so the products stay at most the (64-bit) activations they scale.
    const auto scaled = [&](int64_t bytes) {
      const double v = std::floor(static_cast<double>(bytes) * share);
      return v >= static_cast<double>(bytes) ? bytes : static_cast<int64_t>(v);
    };
    x.weight_activation = scaled(x.activation_bytes);
    x.tp_replicated_weight_activation = scaled(s.replicated_activation);
  }
  return x;
}

}  // namespace

std::vector<StageProfile> stage_profiles(const Model& model, const std::vector<StageSpec>& stages,
                                         const std::vector<Recompute>& recompute,
                                         const std::vector<int>& tensor, bool sequence_parallel) {
  std::vector<StageProfile> out;
  out.reserve(stages.size());
  for (size_t g = 0; g < stages.size(); ++g) {
    const StageSpec& s = stages[g];
    const Recompute mode = recompute.empty() ? Recompute::kFull : recompute[g];
    StageProfile p;
    for (int l = s.first_layer; l <= s.last_layer; ++l) {
      const int t = tensor.empty() ? 1 : tensor[g];
      const Layer& base = model.layers.at(static_cast<size_t>(l));
      std::optional<TensorShard> shard;
      if (t > 1 && base.tensor_split) shard = (*base.tensor_split)(t);
      std::optional<Layer> copy;
      if (shard) copy = sharded(base, *shard, t);
      // One rank's GEMMs are 1/t of the layer's, and less efficient for it.
      if (!shard && t > 1 && base.tensor_retime) copy = base.at_tensor_degree(t);
      if (!shard && t > 1 && !sequence_parallel &&
          base.tp_whole_forward + base.tp_whole_backward_input + base.tp_whole_backward_weight >
              Time::zero()) {
        // Whole on every rank: t times over, for the lowering's division by t.
        if (!copy) copy = base;
        const char* what = "a tensor-parallel layer's costs";
        copy->forward =
            checked_add(copy->forward, checked_mul(base.tp_whole_forward, t - 1, what), what);
        copy->backward_input = checked_add(
            copy->backward_input, checked_mul(base.tp_whole_backward_input, t - 1, what), what);
        copy->backward_weight = checked_add(
            copy->backward_weight, checked_mul(base.tp_whole_backward_weight, t - 1, what), what);
      }
      const Layer& layer = copy ? *copy : base;
      p.forward = checked_add(p.forward, layer.forward, "a stage's forward time");
      p.backward_input =
          checked_add(p.backward_input, layer.backward_input, "a stage's backward time");
      p.backward_weight =
          checked_add(p.backward_weight, layer.backward_weight, "a stage's backward time");
      p.optimizer = checked_add(p.optimizer, layer.optimizer, "a stage's optimizer time");
      p.activation_bytes =
          checked_add(p.activation_bytes, layer.activation_bytes, "a stage's activation memory");
      const int64_t weight_kept = layer.weight_kept();
      p.weight_activation_bytes += weight_kept;  // at most activation_bytes: no overflow
      p.replicated_weight_activation +=
          layer.weight_activation ? std::min({layer.tp_replicated_weight_activation,
                                              layer.tp_replicated_activation, weight_kept})
                                  : layer.tp_replicated_activation;
      // Tied weights whose owner is on another stage: this stage's own copy.
      const int64_t params = checked_add(layer.params, base.tied_copy(s.first_layer, s.last_layer),
                                         "a stage's parameter count");
      p.params = checked_add(p.params, params, "a stage's parameter count");
      p.replicated_params =
          checked_add(p.replicated_params, layer.tp_replicated_params, "a stage's parameter count");
      StageProfile::LayerCost cost{
          layer.backward_input,
          layer.backward_weight,
          params,
          layer.tp_replicated_params,
          layer.forward,
          allreduces(layer.tp_forward_allreduces, layer.tp_allreduce_bytes),
          allreduces(layer.tp_backward_allreduces, layer.tp_allreduce_bytes,
                     layer.tp_backward_beside),
          layer.recomputed};
      if (shard) {
        cost.tp_forward = shard->forward_collectives;
        cost.tp_backward = shard->backward_collectives;
        // One input-gradient all-reduce (a column-split linear or convolution): the layer's
        // weight gradient can run beside it.
        if (cost.tp_backward.size() == 1 &&
            cost.tp_backward[0].kind == TpCollective::Kind::kAllReduce)
          cost.tp_backward[0].beside = layer.backward_weight;
      }
      p.layers.push_back(std::move(cost));
      p.replicated_activation =
          checked_add(p.replicated_activation, layer.tp_replicated_activation, "activations");
      // What recompute keeps and re-allocates, layer by layer (Korthikanti et al. 2022).
      const int64_t input =
          l == 0 ? model.input_bytes : model.layers.at(static_cast<size_t>(l) - 1).output_bytes;
      if (mode == Recompute::kSelective) {
        const int64_t core = std::min(layer.attention_core_bytes, layer.activation_bytes);
        p.kept_bytes = checked_add(p.kept_bytes, layer.activation_bytes - core, "kept activations");
        p.transient_bytes = std::max(p.transient_bytes, core);
        p.recompute_time =
            checked_add(p.recompute_time, layer.attention_core_forward, "a recompute time");
      } else if (layer.recomputed) {
        // Full: the layer's input, which tensor parallelism leaves whole.
        const int64_t kept = std::min(input, layer.activation_bytes);
        p.kept_bytes = checked_add(p.kept_bytes, kept, "kept activations");
        p.replicated_kept = checked_add(p.replicated_kept, kept, "kept activations");
        p.transient_bytes = std::max(p.transient_bytes, layer.activation_bytes - kept);
        p.recompute_time = checked_add(p.recompute_time, layer.forward, "a recompute time");
      } else {
        // Not checkpointed (an embedding, an output layer): everything stays, nothing reruns.
        p.kept_bytes = checked_add(p.kept_bytes, layer.activation_bytes, "kept activations");
        p.replicated_kept =
            checked_add(p.replicated_kept, layer.tp_replicated_activation, "kept activations");
      }
    }
    p.full_recompute = mode != Recompute::kSelective;
    // Selective recompute keeps the layer-norm and dropout tensors among the rest
    // (Korthikanti et al., Table 2).
    if (!p.full_recompute) p.replicated_kept = p.replicated_activation;
    p.input_bytes = s.first_layer == 0
                        ? model.input_bytes
                        : model.layers.at(static_cast<size_t>(s.first_layer) - 1).output_bytes;
    p.output_bytes = model.layers.at(static_cast<size_t>(s.last_layer)).output_bytes;
    out.push_back(p);
  }
  return out;
}

}  // namespace pipesim
