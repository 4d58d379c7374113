// Per-stage costs summed from the layers of each global stage (schedules/lower.h).
#include <algorithm>

#include "core/checked.h"
#include "schedules/lower.h"

namespace pipesim {

std::vector<StageProfile> stage_profiles(const Model& model, const std::vector<StageSpec>& stages,
                                         const std::vector<Recompute>& recompute) {
  std::vector<StageProfile> out;
  out.reserve(stages.size());
  for (size_t g = 0; g < stages.size(); ++g) {
    const StageSpec& s = stages[g];
    const Recompute mode = recompute.empty() ? Recompute::kFull : recompute[g];
    StageProfile p;
    for (int l = s.first_layer; l <= s.last_layer; ++l) {
      const Layer& layer = model.layers.at(static_cast<size_t>(l));
      p.forward = checked_add(p.forward, layer.forward, "a stage's forward time");
      p.backward_input =
          checked_add(p.backward_input, layer.backward_input, "a stage's backward time");
      p.backward_weight =
          checked_add(p.backward_weight, layer.backward_weight, "a stage's backward time");
      p.optimizer = checked_add(p.optimizer, layer.optimizer, "a stage's optimizer time");
      p.activation_bytes =
          checked_add(p.activation_bytes, layer.activation_bytes, "a stage's activation memory");
      p.params = checked_add(p.params, layer.params, "a stage's parameter count");
      p.layers.push_back({layer.backward_input, layer.backward_weight, layer.params, layer.forward,
                          layer.tp_forward_allreduces, layer.tp_backward_allreduces,
                          layer.tp_allreduce_bytes});
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
      } else {
        const int64_t kept = std::min(input, layer.activation_bytes);
        p.kept_bytes = checked_add(p.kept_bytes, kept, "kept activations");
        p.transient_bytes = std::max(p.transient_bytes, layer.activation_bytes - kept);
      }
    }
    p.full_recompute = mode != Recompute::kSelective;
    if (p.full_recompute) p.recompute_time = p.forward;
    // Full recompute keeps layer inputs, which tensor parallelism leaves whole; selective
    // keeps the layer-norm and dropout tensors among the rest (Korthikanti et al., Table 2).
    p.replicated_kept = mode == Recompute::kFull ? p.kept_bytes : p.replicated_activation;
    p.input_bytes = s.first_layer == 0
                        ? model.input_bytes
                        : model.layers.at(static_cast<size_t>(s.first_layer) - 1).output_bytes;
    p.output_bytes = model.layers.at(static_cast<size_t>(s.last_layer)).output_bytes;
    out.push_back(p);
  }
  return out;
}

}  // namespace pipesim
