#include "apps/model_command.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/checked.h"
#include "core/json_text.h"
#include "core/output_files.h"
#include "core/units.h"

namespace pipesim {
namespace {

// How the strategy splits each layer over ranks, for the per-rank view of `--ops`.
struct Ranks {
  std::vector<int> tensor;  // each layer's tensor degree: its stage's (Strategy::tensor_of)
  int context = 1, expert = 1, expert_tensor = 1;
  bool sequence_parallel = false;

  explicit Ranks(const Scenario& sc)
      : tensor(sc.model.layers.size(), 1),
        context(sc.strategy.context),
        expert(sc.strategy.expert),
        expert_tensor(sc.strategy.expert_tensor),
        sequence_parallel(sc.strategy.sequence_parallel) {
    for (const StageSpec& st : sc.strategy.stages) {
      for (int l = st.first_layer; l <= st.last_layer; ++l)
        tensor.at(static_cast<size_t>(l)) = sc.strategy.tensor_of(st);
    }
  }
  // Whether any layer runs split: then `--ops` shows one rank's share of each op.
  bool split(const Model& m) const {
    for (size_t l = 0; l < m.layers.size(); ++l) {
      if (tensor[l] > 1 || context > 1 || (m.layers[l].moe && expert * expert_tensor > 1)) return true;
    }
    return false;
  }
  std::vector<OpCost> of(const Model& m, size_t l) const {
    return m.layers[l].rank_ops(tensor[l], expert, context, sequence_parallel, expert_tensor);
  }
  std::string describe(const Strategy& s) const {
    return fmt::format(
        "rank fwd, rank bwd: one rank's share of each op at tensor {}{}, context {}, expert {}"
        "{}{} (collectives not included)\n",
        s.tensor, s.stages.size() > 1 ? " (or its stage's)" : "", context, expert,
        expert_tensor > 1 ? fmt::format(", expert tensor {}", expert_tensor) : "",
        sequence_parallel ? ", sequence parallel" : "");
  }
};

// Where the analytic costs' efficiency curves come from (SPEC section 9: a GPU that
// borrows another generation's curves says so).
// And the share of compute speed it loses beside its own transfers inside a server.
std::string curves_line(const GpuSpec& gpu) {
  const bool fitted = gpu.curves.ends_with(" runs");  // a preset's fit, not the user's
  const std::string slowed =
      gpu.comm_interference > 0
          ? fmt::format(
                "{}'s compute runs {:g} % slower while it sends inside its server "
                "(cluster.gpu.comm_interference)\n",
                gpu.name, 100 * gpu.comm_interference)
          : "";
  const std::string note =
      (gpu.curves_note.empty() ? "" : fmt::format("{}: {}\n", gpu.name, gpu.curves_note)) +
      (gpu.clock_share() < 1
           ? fmt::format("{}'s compute runs at {:.1f} % of its clock under its {:g} W power "
                         "limit (rated {:g} W; cluster.gpu.power_limit)\n",
                         gpu.name, 100 * gpu.clock_share(), gpu.power_limit_watts, gpu.tdp_watts)
           : "");
  if (gpu.curves_borrowed && fitted)
    return fmt::format(
               "{}'s efficiency curves are borrowed from the fit to {} (none of its own yet; "
               "docs/presets.md)\n",
               gpu.name, gpu.curves) +
           note + slowed;
  return fmt::format("{}'s efficiency curves: {}{}\n", gpu.name, fitted ? "fitted to " : "",
                     gpu.curves) +
         note + slowed;
}

// A mixture of experts: how many layers route, and the parameters a token visits.
std::string moe_line(const Model& model) {
  int moe_layers = 0;
  double all_params = 0, idle = 0;
  const MoeFacts* moe = nullptr;
  for (const Layer& l : model.layers) {
    all_params += static_cast<double>(l.params);
    if (!l.moe) continue;
    ++moe_layers;
    moe = &*l.moe;
    idle += static_cast<double>(l.moe->expert_params) * (l.moe->experts - l.moe->top_k) /
            l.moe->experts;
  }
  if (moe == nullptr) return "";
  return fmt::format(
      "mixture of experts: {} MoE layers of {} experts, top {}; {:.4g} B parameters, {:.4g} B "
      "active per token\n",
      moe_layers, moe->experts, moe->top_k, all_params / 1e9, (all_params - idle) / 1e9);
}

const char* bound(bool memory) {
  return memory ? "memory" : "compute";
}

// One op's line of the table and its JSON; `rank`: its per-rank share, if shown.
void add_op(const OpCost& op, const OpCost* rank, std::string& table, nlohmann::ordered_json& ops) {
  table += fmt::format("  {:<14} {:>12.4g} {:>12} {:>12} {:>12} {:>11} {:>11} {:>14}", op.name,
                       op.flops, op.matrix ? "matrix" : "vector",
                       format_bytes(static_cast<int64_t>(op.bytes)), bound(op.forward_memory_bound),
                       format_time(op.forward), format_time(op.backward_input + op.backward_weight),
                       bound(op.backward_memory_bound));
  if (rank != nullptr)
    table += fmt::format(" {:>11} {:>11}", format_time(rank->forward),
                         format_time(rank->backward_input + rank->backward_weight));
  table += "\n";
  ops.push_back({{"name", op.name},
                 {"unit", op.matrix ? "matrix" : "vector"},
                 {"forward_flops", op.flops},
                 {"forward_bytes", op.bytes},
                 {"forward_s", op.forward.seconds()},
                 {"backward_input_s", op.backward_input.seconds()},
                 {"backward_weight_s", op.backward_weight.seconds()},
                 {"forward_bound", bound(op.forward_memory_bound)},
                 {"backward_bound", bound(op.backward_memory_bound)}});
  if (rank != nullptr) {
    ops.back()["rank_forward_s"] = rank->forward.seconds();
    ops.back()["rank_backward_input_s"] = rank->backward_input.seconds();
    ops.back()["rank_backward_weight_s"] = rank->backward_weight.seconds();
  }
}

nlohmann::ordered_json layer_json(const Layer& l) {
  return {{"name", l.name},
          {"forward_flops", l.forward_flops},
          {"params", l.params},
          {"activation_bytes", l.activation_bytes},
          {"output_bytes", l.output_bytes},
          {"forward_s", l.forward.seconds()},
          {"backward_input_s", l.backward_input.seconds()},
          {"backward_weight_s", l.backward_weight.seconds()},
          {"source", l.source}};
}

std::string header(bool with_ops, bool per_rank) {
  std::string out =
      fmt::format("{:<16} {:>12} {:>12} {:>12} {:>12} {:>11} {:>11} {:>14}\n", "layer", "fwd FLOPs",
                  "params", "activation", "output", "forward", "backward", "source");
  if (with_ops)
    out += fmt::format("  {:<14} {:>12} {:>12} {:>12} {:>12} {:>11} {:>11} {:>14}{}\n", "op",
                       "fwd FLOPs", "unit", "fwd bytes", "fwd bound", "forward", "backward",
                       "bwd bound",
                       per_rank ? fmt::format(" {:>11} {:>11}", "rank fwd", "rank bwd") : "");
  return out;
}

}  // namespace

// Per-layer table of the model: FLOPs, parameters, activation and output bytes, times and
// where they come from; totals last.
int model_command(const Scenario& sc, const std::vector<InputIdentity>& inputs,
                  const std::string& json_path, bool with_ops, std::ostream& out) {
  const Ranks ranks(sc);
  const bool per_rank = with_ops && ranks.split(sc.model);
  std::string table = fmt::format("model {}: {} layers, per micro-batch of {} ({})\n",
                                  sc.model.name, sc.model.layers.size(), sc.training.micro_batch,
                                  to_string(sc.training.precision));
  table += curves_line(sc.cluster.device(0).gpu) + moe_line(sc.model);
  if (per_rank) table += ranks.describe(sc.strategy);
  table += header(with_ops, per_rank);
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  double flops = 0;
  int64_t params = 0, activation = 0;
  Time fwd, bwd;
  for (size_t i = 0; i < sc.model.layers.size(); ++i) {
    const Layer& l = sc.model.layers[i];
    table += fmt::format("{:<16} {:>12.4g} {:>12} {:>12} {:>12} {:>11} {:>11} {:>14}\n", l.name,
                         l.forward_flops, l.params, format_bytes(l.activation_bytes),
                         format_bytes(l.output_bytes), format_time(l.forward),
                         format_time(l.backward()), l.source);
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    if (with_ops) {
      const std::vector<OpCost> shares = per_rank ? ranks.of(sc.model, i) : l.ops;
      for (size_t k = 0; k < l.ops.size(); ++k)
        add_op(l.ops[k], per_rank && !shares.empty() ? &shares[k] : nullptr, table, ops);
    }
    layers.push_back(layer_json(l));
    if (with_ops) layers.back()["ops"] = ops;
    flops += l.forward_flops;
    params = checked_add(params, l.params, "the model's parameter count");
    activation = checked_add(activation, l.activation_bytes, "the model's activations");
    fwd = checked_add(fwd, l.forward, "the model's forward time");
    bwd = checked_add(bwd, l.backward(), "the model's backward time");
  }
  table += fmt::format("{:<16} {:>12.4g} {:>12} {:>12} {:>12} {:>11} {:>11}\n", "total", flops,
                       params, format_bytes(activation), "", format_time(fwd), format_time(bwd));
  const GpuSpec& gpu = sc.cluster.device(0).gpu;
  nlohmann::ordered_json j;
  j["model"] = sc.model.name;
  j["micro_batch"] = sc.training.micro_batch;
  j["efficiency_curves"] = {
      {"gpu", gpu.name}, {"fitted_to", gpu.curves}, {"borrowed", gpu.curves_borrowed}};
  if (!gpu.curves_note.empty()) j["efficiency_curves"]["note"] = gpu.curves_note;
  if (gpu.clock_share() < 1)
    j["power_limit"] = {{"watts", gpu.power_limit_watts},
                        {"rated_watts", gpu.tdp_watts},
                        {"clock_share", gpu.clock_share()}};
  if (per_rank)
    j["ranks"] = {{"tensor", sc.strategy.tensor},
                  {"context", ranks.context},
                  {"expert", ranks.expert},
                  {"sequence_parallel", ranks.sequence_parallel}};
  j["layers"] = layers;
  j["total"] = {{"forward_flops", flops},
                {"params", params},
                {"activation_bytes", activation},
                {"forward_s", fwd.seconds()},
                {"backward_s", bwd.seconds()}};
  const std::string text = json_text(j, 2) + "\n";
  OutputFiles files(inputs);
  if (json_path == "-") {
    out << text;
  } else {
    if (!json_path.empty()) files.add("--json", json_path, [&](std::ostream& f) { f << text; });
    out << table;
  }
  check_stdout(out);
  files.commit();
  return 0;
}

}  // namespace pipesim
