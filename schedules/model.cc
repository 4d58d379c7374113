#include "schedules/model.h"

#include <array>
#include <cmath>
#include <utility>

namespace pipesim {

int64_t element_bytes(Precision p) {
  return p == Precision::kFp32 ? 4 : 2;
}

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kMixed:
      return "mixed";
    case Precision::kFp8:
      return "fp8";
    case Precision::kNvfp4:
      return "nvfp4";
  }
  return "?";
}

ParamBytes bytes_per_param(const Training& t) {
  const Precision p = t.precision;
  ParamBytes b;
  b.weights = element_bytes(p);
  b.gathered = b.weights;
  b.gradients = t.fp32_gradients ? 4 : element_bytes(p);
  // Mixed precision keeps master weights (counted as optimizer state, as ZeRO does): fp32,
  // their remainders or none; fp8 keeps an fp8 copy of the 16-bit weights beside them
  // (Transformer Engine); nvfp4 its two NVFP4 copies, row-wise and column-wise, 2 x 0.5625
  // bytes counted as 1.
  if (p != Precision::kFp32) b.optimizer = t.master_weight_bytes;
  if (quantized(p)) b.weights += 1;
  if (quantized(p) && t.fp8_params) b.weights = b.gathered = 1;
  b.optimizer += optimizer_states(t.optimizer) * t.optimizer_state_bytes;
  return b;
}

int64_t optimizer_states(Optimizer o) {
  return o == Optimizer::kSgd ? 0 : o == Optimizer::kMomentum ? 1 : 2;
}

namespace {
constexpr std::array<std::pair<std::string_view, ScheduleKind>, 13> kScheduleNames{{
    {"gpipe", ScheduleKind::kGpipe},
    {"gpipe-recompute", ScheduleKind::kGpipeRecompute},
    {"dapple", ScheduleKind::kDapple},
    {"1f1b", ScheduleKind::kDapple},
    {"pipedream-flush", ScheduleKind::kDapple},
    {"pipedream", ScheduleKind::kPipeDream},
    {"pipedream-2bw", ScheduleKind::kPipeDream2BW},
    {"interleaved", ScheduleKind::kInterleaved},
    {"zb-h1", ScheduleKind::kZbH1},
    {"zb-h2", ScheduleKind::kZbH2},
    {"zb-1p", ScheduleKind::kZb1p},
    {"zb-2p", ScheduleKind::kZb2p},
    {"zb-v", ScheduleKind::kZbV},
}};
// Megatron-Core's names (--recompute-modules), then the per-op policies'.
constexpr std::array<std::pair<std::string_view, RecomputeModule>, kRecomputeModuleCount>
    kRecomputeModuleNames{{
        {"core_attn", RecomputeModule::kCoreAttn},
        {"layernorm", RecomputeModule::kLayernorm},
        {"mlp", RecomputeModule::kMlp},
        {"moe_act", RecomputeModule::kMoeAct},
        {"mla_up_proj", RecomputeModule::kMlaUpProj},
        {"shared_experts", RecomputeModule::kSharedExperts},
        {"moe", RecomputeModule::kMoe},
        {"alternate_gemms", RecomputeModule::kAlternateGemms},
    }};
constexpr std::array<std::pair<std::string_view, Warmup>, 3> kWarmupNames{{
    {"schedule", Warmup::kSchedule},
    {"deep", Warmup::kDeep},
    {"auto", Warmup::kAuto},
}};

// The first name of a value, and the value of a name, in a (name, value) table.
template <typename Table, typename E>
std::string_view name_of(const Table& table, E value) {
  for (const auto& [name, v] : table) {
    if (v == value) return name;
  }
  return "?";
}
template <typename Table>
auto value_of(const Table& table, std::string_view name)
    -> std::optional<typename Table::value_type::second_type> {
  for (const auto& [n, v] : table) {
    if (n == name) return v;
  }
  return std::nullopt;
}
}  // namespace

std::string_view to_string(ScheduleKind k) {
  return name_of(kScheduleNames, k);
}

std::optional<ScheduleKind> parse_schedule(std::string_view name) {
  return value_of(kScheduleNames, name);
}

std::string schedule_names() {
  std::string out;
  for (const auto& [name, kind] : kScheduleNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

bool is_async(ScheduleKind k) {
  return k == ScheduleKind::kPipeDream || k == ScheduleKind::kPipeDream2BW;
}

bool needs_split_backward(ScheduleKind k) {
  return k == ScheduleKind::kZbH1 || k == ScheduleKind::kZbH2 || needs_stage_costs(k);
}

bool needs_stage_costs(ScheduleKind k) {
  return k == ScheduleKind::kZb1p || k == ScheduleKind::kZb2p || k == ScheduleKind::kZbV;
}

std::string_view to_string(Warmup w) {
  return name_of(kWarmupNames, w);
}

std::optional<Warmup> parse_warmup(std::string_view name) {
  return value_of(kWarmupNames, name);
}

std::string_view to_string(RecomputeModule m) {
  return name_of(kRecomputeModuleNames, m);
}

std::optional<RecomputeModule> parse_recompute_module(std::string_view name) {
  return value_of(kRecomputeModuleNames, name);
}

RecomputeModules effective_modules(RecomputeModules modules) {
  if ((modules & module_bit(RecomputeModule::kMoe)) != 0)
    modules &= static_cast<RecomputeModules>(
        ~(module_bit(RecomputeModule::kMoeAct) | module_bit(RecomputeModule::kSharedExperts)));
  return modules;
}

RecomputeCost Layer::selective(RecomputeModules modules) const {
  RecomputeCost sum;
  modules = effective_modules(modules);
  for (const RecomputePart& p : recompute_parts) {
    if ((modules & module_bit(p.module)) == 0) continue;
    sum.forward += p.cost.forward;
    sum.flops += p.cost.flops;
    sum.bytes += p.cost.bytes;
    sum.replicated_bytes += p.cost.replicated_bytes;
  }
  sum.bytes = std::min(sum.bytes, activation_bytes);
  sum.replicated_bytes = std::min(sum.replicated_bytes, sum.bytes);
  return sum;
}

int64_t Layer::held_whole(RecomputeModules modules, int t, bool sequence_parallel) const {
  if (t <= 1 || !sequence_parallel || !tensor_parallel) return 0;
  int64_t out = 0;
  for (const RecomputePart& part : recompute_parts) {
    if ((effective_modules(modules) & module_bit(part.module)) == 0 || !part.regather) continue;
    out += part.pinned * (t - 1) + 2 * tp_allreduce_bytes;
  }
  return out;
}

std::vector<char> checkpointed_layers(const Model& m, int first, int last, int block) {
  std::vector<char> out;
  int taken = 0;
  for (int l = first; l <= last; ++l) {
    const bool yes =
        m.layers.at(static_cast<size_t>(l)).recomputed && (block <= 0 || taken < block);
    taken += yes ? 1 : 0;
    out.push_back(yes ? 1 : 0);
  }
  return out;
}

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kFull:
      return "full";
    case Recompute::kSelective:
      return "selective";
  }
  return "?";
}

bool has_warmup(ScheduleKind k) {
  return k == ScheduleKind::kDapple;
}

int64_t optimizer_bytes_per_param(const Training& t) {
  // Each state read and written: 2 x its bytes. fp32: gradient 4 + weight read and write 8.
  // mixed: gradient 2 (4 when kept in fp32) + the master copy read and written (8 for fp32)
  // + the 16-bit weight written 2 (and read 2 as well where the master copy is not a whole
  // fp32 value: remainders or none).
  const int64_t gradient = bytes_per_param(t).gradients;
  const int64_t states = 2 * optimizer_states(t.optimizer) * t.optimizer_state_bytes;
  if (t.precision == Precision::kFp32) return gradient + 8 + states;
  // A whole fp32 master copy is all the update reads; remainders or none need the 16-bit
  // weight read as well.
  const bool whole_master = t.master_weight_bytes == 4;
  const int64_t master = 2 * t.master_weight_bytes + (whole_master ? 0 : 2);
  // fp8 and nvfp4: the quantized weight copy written as well; with fp8 parameters, only it.
  const int64_t written = !quantized(t.precision) ? 2 : t.fp8_params ? 1 : 3;
  return gradient + master + states + written;
}

int64_t Model::tied_copy(int l, int first, int last) const {
  const int owner = layers.at(static_cast<size_t>(l)).tied_to;
  if (owner < 0 || (owner >= first && owner <= last)) return 0;
  for (int k = first; k < l; ++k)
    if (layers.at(static_cast<size_t>(k)).tied_to == owner) return 0;  // its copy, held once
  return layers.at(static_cast<size_t>(l)).tied_params;
}

int64_t Model::stage_params(int first, int last) const {
  int64_t p = 0;
  for (int l = first; l <= last; ++l)
    p += layers.at(static_cast<size_t>(l)).params + tied_copy(l, first, last);
  return p;
}

std::string_view to_string(ContextComm c) {
  switch (c) {
    case ContextComm::kP2p:
      return "p2p";
    case ContextComm::kAllGather:
      return "all-gather";
    case ContextComm::kA2a:
      return "a2a";
  }
  return "?";
}

int64_t micro_batches(const Training& t, const Strategy& s) {
  return t.global_batch / (t.micro_batch * s.data);
}

void time_exchanges(RecomputePart& p, const std::vector<OpCost>& ops) {
  p.before_dispatch = p.before_combine = Time::zero();
  for (const OpCost& op : ops) {
    if (op.name.starts_with("router") || op.name == "permute") p.before_dispatch += op.forward;
    if (op.name.find("expert_") != std::string::npos && !op.name.starts_with("shared_"))
      p.before_combine += op.forward;
  }
}

Layer Layer::at_tensor_degree(int t, int ep, int cp, int etp) const {
  Layer x = *this;
  if ((t <= 1 && ((ep <= 1 && etp <= 1) || !moe) && cp <= 1) || !tensor_retime) return x;
  TensorTimes times = (*tensor_retime)(t, moe ? ep : 1, cp, moe ? etp : 1);
  x.forward = times.forward;
  x.backward_input = times.backward_input;
  x.backward_weight = times.backward_weight;
  x.tp_backward_beside = std::move(times.backward_beside);
  x.pieces = std::move(times.pieces);
  // The recompute parts' ops at these degrees.
  for (RecomputePart& p : x.recompute_parts) {
    p.cost.forward = Time::zero();
    for (const OpCost& op : times.ops) {
      const auto at = std::find(p.ops.begin(), p.ops.end(), op.name);
      if (at != p.ops.end())
        p.cost.forward += share_of(op.forward, p.shares[static_cast<size_t>(at - p.ops.begin())]);
    }
    if (p.exchanges) time_exchanges(p, times.ops);
  }
  return x;
}

Layer Layer::at_degrees(int t, int ep, int cp, int etp, int k) const {
  if (tensor_retime || cp * k <= 1 || !sample_retime) return at_tensor_degree(t, ep, cp * k, etp);
  // (Without tensor_retime: the layer itself at every degree, its rows split cp k ways.)
  Layer x = *this;
  const TensorTimes times = (*sample_retime)(cp * k);
  x.forward = times.forward;
  x.backward_input = times.backward_input;
  x.backward_weight = times.backward_weight;
  // The weight-gradient GEMMs the backward's collectives run beside (a head's logits, its
  // only one), as their share of the weight gradient.
  if (backward_weight > Time::zero()) {
    const double g = static_cast<double>(x.backward_weight.ps_count()) /
                     static_cast<double>(backward_weight.ps_count());
    for (Time& b : x.tp_backward_beside)
      b = Time::ps(static_cast<int64_t>(std::round(static_cast<double>(b.ps_count()) * g)));
  }
  return x;
}

std::vector<OpCost> Layer::rank_ops(int t, int ep, int cp, bool sequence_parallel,
                                    int etp) const {
  if (tensor_split && t > 1) return {};  // its shards are layers of their own (sharded())
  std::vector<OpCost> out = ops;
  if (tensor_retime && (t > 1 || ((ep > 1 || etp > 1) && moe) || cp > 1)) {
    out = (*tensor_retime)(t, moe ? ep : 1, cp, moe ? etp : 1).ops;
  } else if (!tensor_retime && sample_retime && cp > 1) {
    std::vector<OpCost> split = (*sample_retime)(cp).ops;  // (a profile's: none)
    if (split.size() == ops.size()) out = std::move(split);
  }
  PIPESIM_ASSERT(out.size() == ops.size(), "a retimed layer keeps its ops");
  // The lowering runs a layer's time / (t cp) on each rank. Without sequence parallelism
  // stage_profiles first adds t - 1 whole copies of each whole op (at its time on the full
  // tokens), so such an op comes to (its time at cp + (t - 1) x its whole time) / (t cp).
  const int64_t ranks = int64_t{t} * cp;
  const auto share = [ranks](Time at_degree, Time whole, int64_t copies) {
    const double ps = static_cast<double>(at_degree.ps_count()) +
                      static_cast<double>(copies) * static_cast<double>(whole.ps_count());
    return Time::ps(static_cast<int64_t>(std::ceil(ps / static_cast<double>(ranks))));
  };
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t copies = ops[i].tensor_whole && !sequence_parallel ? t - 1 : 0;
    out[i].forward = share(out[i].forward, ops[i].forward, copies);
    out[i].backward_input = share(out[i].backward_input, ops[i].backward_input, copies);
    out[i].backward_weight = share(out[i].backward_weight, ops[i].backward_weight, copies);
    out[i].tensor_whole = ops[i].tensor_whole;
  }
  return out;
}

}  // namespace pipesim
