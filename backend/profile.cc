#include "backend/profile.h"

#include <fmt/format.h>

#include <algorithm>

#include "backend/stats.h"
#include "backend/work.h"

namespace pipesim {
namespace {

Time median_time(Executor& e, const Op& op, const ExecWork& w, int repeats) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) t.push_back(e.time_op(op, w).seconds());
  return time_from_seconds(median(t));
}

std::string cell(Time t) {
  return fmt::format("{:.6f} us", static_cast<double>(t.ps_count()) / 1e6);
}

}  // namespace

Model profile_model(const Scenario& s, Executor& e, int repeats) {
  Model m = s.model;
  const int positions = s.strategy.positions();
  for (size_t g = 0; g < s.strategy.stages.size(); ++g) {
    const StageSpec& st = s.strategy.stages[g];
    const int stage = static_cast<int>(g);
    const double rate = stage_flop_rate(s, stage);
    const int position = stage % positions;
    const int device = s.placement.front()[static_cast<size_t>(position)].front();
    for (int l = st.first_layer; l <= st.last_layer; ++l) {
      Layer& layer = m.layers[static_cast<size_t>(l)];
      auto measure = [&](OpKind kind, Time scenario_time) {
        if (scenario_time == Time::zero()) return Time::zero();
        Op op;
        op.kind = kind;
        op.device = device;
        op.stage = stage;
        op.duration = scenario_time;
        return median_time(e, op, {scenario_time.seconds() * rate, 0}, repeats);
      };
      layer.forward = measure(OpKind::kForward, layer.forward);
      if (layer.split_backward) {
        layer.backward_input = measure(OpKind::kBackward, layer.backward_input);
        layer.backward_weight = measure(OpKind::kWeightGrad, layer.backward_weight);
      } else {
        layer.backward_input = measure(OpKind::kBackward, layer.backward_input);
      }
      layer.source = "profile";
    }
  }
  return m;
}

void write_profile_csv(std::ostream& out, const Model& m) {
  const bool split = std::any_of(m.layers.begin(), m.layers.end(),
                                 [](const Layer& l) { return l.split_backward; });
  // With a split backward, what W keeps past B (Layer::weight_kept), so a profile read back
  // frees at B what the model it was measured from frees.
  out << "name, forward, " << (split ? "backward_input, backward_weight" : "backward")
      << ", activation, " << (split ? "weight_activation, " : "") << "output, params, optimizer\n";
  for (const Layer& l : m.layers) {
    out << l.name << ", " << cell(l.forward) << ", ";
    if (split) {
      out << cell(l.backward_input) << ", " << cell(l.backward_weight);
    } else {
      out << cell(l.backward());
    }
    out << fmt::format(", {} B, ", l.activation_bytes);
    if (split) out << fmt::format("{} B, ", l.weight_kept());
    out << fmt::format("{} B, {}, ", l.output_bytes, l.params) << cell(l.optimizer) << "\n";
  }
}

}  // namespace pipesim
