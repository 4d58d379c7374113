#include "backend/work.h"

#include <cmath>

namespace pipesim {

double stage_flop_rate(const Scenario& s, int stage) {
  const StageSpec& st = s.strategy.stages.at(static_cast<size_t>(stage));
  double flops = 0, seconds = 0;
  for (int l = st.first_layer; l <= st.last_layer; ++l) {
    const Layer& layer = s.model.layers.at(static_cast<size_t>(l));
    flops += layer.forward_flops;
    seconds += layer.forward.seconds();
  }
  flops /= s.strategy.tensor_of(st);
  if (flops > 0 && seconds > 0) return flops / seconds;
  const GpuSpec& gpu = s.cluster.device(0).gpu;
  const double peak =
      s.training.precision != Precision::kFp32 ? gpu.peak_flops : gpu.peak_fp32_flops;
  // No FLOPs to go by: the matrix units at the efficiency of a large GEMM.
  return peak * gpu.clock_share() * gpu.efficiency.value_or(gpu.matrix_efficiency.at(1e12));
}

std::vector<ExecWork> op_work(const Scenario& s, const TaskGraph& g) {
  std::vector<ExecWork> work(g.size());
  const int stages = static_cast<int>(s.strategy.stages.size());
  std::vector<double> rate(static_cast<size_t>(stages));
  std::vector<int64_t> params(static_cast<size_t>(stages), 0);
  for (int st = 0; st < stages; ++st) {
    rate[static_cast<size_t>(st)] = stage_flop_rate(s, st);
    const StageSpec& spec = s.strategy.stages[static_cast<size_t>(st)];
    for (int l = spec.first_layer; l <= spec.last_layer; ++l)
      params[static_cast<size_t>(st)] += s.model.layers[static_cast<size_t>(l)].params;
    params[static_cast<size_t>(st)] /= s.strategy.tensor_of(spec);
  }
  const int64_t per_param = optimizer_bytes_per_param(s.training);
  for (OpId id = 0; id < g.size(); ++id) {
    const Op& op = g.op(id);
    ExecWork& w = work[id];
    if (op.kind == OpKind::kTransfer) {
      w.bytes = op.bytes;
      continue;
    }
    const bool known = op.stage >= 0 && op.stage < stages;
    const auto st = static_cast<size_t>(known ? op.stage : 0);
    if (op.kind == OpKind::kOptimizer) {
      w.bytes = known ? params[st] * per_param : 0;
    } else {
      w.flops = op.duration.seconds() * rate[st];
    }
  }
  return work;
}

}  // namespace pipesim
