// What a recompute setting leaves without effect (SPEC: nothing silent): modules with no
// selective stage to act on, or no layer that has them, or that re-run ops freeing nothing;
// a layer count with no full stage, or no stage long enough for it; offloading with no layer
// to move.
#include <fmt/format.h>

#include <algorithm>

#include "scenario/setup.h"

namespace pipesim {

namespace {

// Which global stages recompute in mode m.
std::vector<size_t> stages_in(const std::vector<Recompute>& modes, Recompute m) {
  std::vector<size_t> out;
  for (size_t g = 0; g < modes.size(); ++g)
    if (modes[g] == m) out.push_back(g);
  return out;
}

void module_warnings(const Scenario& s, const std::vector<size_t>& selective,
                     std::vector<std::string>& out) {
  const Strategy& st = s.strategy;
  for (int i = 0; i < kRecomputeModuleCount; ++i) {
    const auto m = static_cast<RecomputeModule>(i);
    if ((st.recompute_modules & module_bit(m)) == 0) continue;
    if ((effective_modules(st.recompute_modules) & module_bit(m)) == 0) {
      out.push_back(fmt::format(
          "strategy.recompute_modules: {}: no effect beside moe (the whole MoE block re-runs, "
          "this part of it included)",
          to_string(m)));
      continue;
    }
    RecomputeCost sum;
    int without = 0;  // transformer layers of the selective stages that lack the module
    for (const size_t g : selective) {
      for (int l = st.stages[g].first_layer; l <= st.stages[g].last_layer; ++l) {
        const Layer& x = s.model.layers[static_cast<size_t>(l)];
        const RecomputeCost c = x.selective(module_bit(m));
        sum.forward += c.forward;
        sum.bytes += c.bytes;
        const bool has = std::any_of(x.recompute_parts.begin(), x.recompute_parts.end(),
                                     [m](const RecomputePart& p) { return p.module == m; });
        without += !x.recompute_parts.empty() && !has ? 1 : 0;
      }
    }
    if (sum.forward == Time::zero() && sum.bytes == 0)
      out.push_back(fmt::format(
          "strategy.recompute_modules: {}: no effect: no layer the selective stages hold has "
          "one",
          to_string(m)));
    else if (m == RecomputeModule::kAlternateGemms && without > 0)
      out.push_back(fmt::format(
          "strategy.recompute_modules: alternate_gemms re-runs dense layers only: {} MoE or "
          "latent-attention layer{} of the selective stages keep{} all their activations",
          without, without == 1 ? "" : "s", without == 1 ? "s" : ""));
    else if (sum.bytes == 0)
      out.push_back(fmt::format(
          "strategy.recompute_modules: {}: re-runs its ops and frees no memory here (flash "
          "attention keeps none of the attention core's s^2 tensors)",
          to_string(m)));
  }
}

// Offloading with nothing to move, with more layers asked for than any stage moves (each
// keeps its last transformer layer: stage_profiles.cc), or under a pipeline, which
// Megatron-Core's CPU offloading does not run.
void offload_warnings(const Scenario& s, std::vector<std::string>& out) {
  const Strategy& st = s.strategy;
  int most = 0;  // the most transformer layers one stage holds
  for (const StageSpec& g : st.stages) {
    const std::vector<char> all = checkpointed_layers(s.model, g.first_layer, g.last_layer, 0);
    most = std::max(most, static_cast<int>(std::count(all.begin(), all.end(), 1)));
  }
  if (most < 2)
    out.push_back(
        "strategy.offload_layers: no effect: no stage holds a transformer layer before its "
        "last (a stage's last transformer layer keeps its activations)");
  else if (st.offload_layers >= most)
    out.push_back(fmt::format(
        "strategy.offload_layers: {} is not below any stage's {} transformer layers at most: "
        "each stage offloads all but its last (Megatron-Core asks for fewer than the layers)",
        st.offload_layers, most));
  if (st.positions() > 1)
    out.push_back(
        "strategy.offload_layers: Megatron-Core's CPU offloading runs without pipeline "
        "parallelism; pipesim offloads the first layers of each stage as asked");
}

}  // namespace

std::vector<std::string> recompute_warnings(const Scenario& s) {
  const Strategy& st = s.strategy;
  const std::vector<Recompute> modes = recompute_modes(s);
  std::vector<std::string> out;
  const std::vector<size_t> selective = stages_in(modes, Recompute::kSelective);
  if (selective.empty()) {
    if (st.recompute_modules != kDefaultRecomputeModules)
      out.push_back(
          "strategy.recompute_modules: no effect: no stage recomputes selectively (recompute: "
          "selective)");
  } else {
    module_warnings(s, selective, out);
  }
  if (st.recompute_layers > 0) {
    const std::vector<size_t> full = stages_in(modes, Recompute::kFull);
    // Whether some full stage holds more checkpointed layers than the count.
    const bool cuts = std::any_of(full.begin(), full.end(), [&](size_t g) {
      const std::vector<char> all =
          checkpointed_layers(s.model, st.stages[g].first_layer, st.stages[g].last_layer, 0);
      return std::count(all.begin(), all.end(), 1) > st.recompute_layers;
    });
    if (full.empty())
      out.push_back(
          "strategy.recompute_layers: no effect: no stage recomputes fully (recompute: full)");
    else if (!cuts)
      out.push_back(fmt::format(
          "strategy.recompute_layers: no effect: no stage that recomputes fully holds more than "
          "{} layers to checkpoint",
          st.recompute_layers));
  }
  if (st.offload_layers > 0) offload_warnings(s, out);
  return out;
}

}  // namespace pipesim
