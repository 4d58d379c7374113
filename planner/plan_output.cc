// `pipesim plan`'s outputs: the JSON of SPEC section 6 and the summary table.
#include <fmt/format.h>

#include <cctype>
#include <cmath>

#include "core/json_text.h"
#include "core/units.h"
#include "planner/planner.h"

namespace pipesim {
namespace {

nlohmann::ordered_json candidate_json(const Candidate& c, double headroom = 0) {
  nlohmann::ordered_json j;
  j["strategy"] = c.strategy;
  if (c.micro_batch) j["training"] = {{"micro_batch", *c.micro_batch}};
  j["makespan_s"] = c.makespan_s;
  j["iteration_time_s"] = c.iteration_s;
  j["throughput_samples_per_s"] = c.throughput;
  j["peak_memory_bytes"] = c.peak_memory;
  j["oom"] = c.oom;
  if (headroom > 0) j["within_headroom"] = !c.oom && !c.tight;
  j["why"] = c.why;
  if (c.goodput) {
    j["goodput"] = *c.goodput;
    j["goodput_samples_per_s"] = c.goodput_throughput();
  }
  j["estimated_iteration_time_s"] = c.estimate_s;
  if (c.estimated_memory > 0) j["estimated_peak_memory_bytes"] = c.estimated_memory;
  if (c.estimated_only) j["estimated_only"] = true;
  return j;
}

}  // namespace

std::string plan_problem(const Plan& p, const std::string& headroom_option) {
  if (p.candidates.empty()) return "no strategy could be simulated for this scenario";
  if (p.candidates.front().oom)
    return "every strategy tried runs out of memory; the least memory is ranked first";
  if (p.candidates.front().tight)
    return fmt::format(
        "no strategy tried leaves {:.3g} % of the GPUs' memory free ({}); the least memory is "
        "ranked first",
        100 * p.headroom, headroom_option);
  return {};
}

std::optional<double> optimality_gap(const Plan& p) {
  if (p.candidates.empty() || !p.candidates.front().fits() || p.lower_bound_s <= 0) return {};
  return std::max(0.0, p.candidates.front().iteration_s / p.lower_bound_s - 1);
}

nlohmann::ordered_json to_json(const Plan& p) {
  nlohmann::ordered_json j;
  j["best"] = p.candidates.empty() ? nlohmann::ordered_json(nullptr)
                                   : candidate_json(p.candidates.front(), p.headroom);
  j["candidates"] = nlohmann::ordered_json::array();
  for (const Candidate& c : p.candidates) j["candidates"].push_back(candidate_json(c, p.headroom));
  j["pareto"] = nlohmann::ordered_json::array();
  for (const Candidate& c : p.pareto) j["pareto"].push_back(candidate_json(c, p.headroom));
  j["baselines"] = nlohmann::ordered_json::object();
  for (const Baseline& b : p.baselines) {
    nlohmann::ordered_json x =
        b.result ? candidate_json(*b.result) : nlohmann::ordered_json::object();
    x["note"] = b.note;
    if (!b.error.empty()) x["error"] = b.error;
    if (b.result && !p.candidates.empty() && b.result->throughput > 0 && !b.result->oom)
      x["best_speedup"] = p.candidates.front().throughput / b.result->throughput;
    j["baselines"][b.name] = x;
  }
  j["compared"] = nlohmann::ordered_json::array();
  for (const Compared& c : p.compared) {
    j["compared"].push_back({{"strategy", c.given},
                             {"iteration_time_s", c.result.iteration_s},
                             {"throughput_samples_per_s", c.result.throughput},
                             {"peak_memory_bytes", c.result.peak_memory},
                             {"oom", c.result.oom},
                             {"rank", c.rank},
                             {"regret", c.regret},
                             {"why", c.result.why}});
  }
  j["warnings"] = p.warnings;
  j["explored"] = p.explored;
  j["simulated"] = p.simulated;
  j["timed_out"] = p.timed_out;
  j["too_large_to_simulate"] = p.too_large;
  j["over_budget"] = p.over_budget;
  j["rejected"] = p.rejected;  // chosen strategies the loader refused (a planner bug if not 0)
  j["estimate_error"] = {{"mean", p.estimate_error_mean}, {"max", p.estimate_error_max}};
  j["memory_estimate_error"] = {{"mean", p.memory_error_mean},
                                {"max", p.memory_error_max},
                                {"fit_but_out_of_memory", p.memory_misses}};
  if (p.headroom > 0) j["headroom"] = p.headroom;
  if (!p.fixed.empty()) j["fixed"] = p.fixed;
  j["exhaustive"] = p.exhaustive;
  if (p.exhaustive) j["tolerance"] = p.tolerance;
  j["lower_bound_iteration_time_s"] = p.lower_bound_s;
  j["optimality_gap"] = optimality_gap(p) ? nlohmann::ordered_json(*optimality_gap(p))
                                          : nlohmann::ordered_json(nullptr);
  j["analytic_s"] = p.analytic_s;
  j["wall_s"] = p.wall_s;
  return j;
}

namespace {
std::string layout(const Candidate& c) {
  std::string reps;
  for (int q = 0; q < c.point.positions(); ++q)
    reps += fmt::format("{}{}", q ? "-" : "", c.point.stages[static_cast<size_t>(q)].replicas);
  return fmt::format("{}x{}{}{}{}{}{}{}", reps, c.point.data,
                     c.point.tensor > 1 ? fmt::format(" t{}", c.point.tensor) : "",
                     c.point.context > 1 ? fmt::format(" cp{}", c.point.context) : "",
                     c.point.expert > 1 || c.point.expert_tensor > 1
                         ? fmt::format(" ep{}{}", c.point.expert,
                                       c.point.expert_tensor > 1
                                           ? fmt::format(" etp{}", c.point.expert_tensor)
                                           : "")
                         : "",
                     c.point.sequence_parallel && c.point.tensor > 1 ? " sp" : "",
                     c.point.virtual_stages > 1 ? fmt::format(" v{}", c.point.virtual_stages) : "",
                     c.point.zero > 0 ? fmt::format(" z{}", c.point.zero) : "");
}
std::string schedule_name(const Candidate& c) {
  return fmt::format(
      "{}{}{}", to_string(c.point.schedule),
      c.point.warmup != Warmup::kSchedule ? fmt::format("/{}", to_string(c.point.warmup)) : "",
      c.point.recompute != Recompute::kNone && c.point.schedule != ScheduleKind::kGpipeRecompute
          ? fmt::format("+{}", to_string(c.point.recompute))
          : "");
}
// One policy, or a letter per stage (F fresh-first, A append-first, S scatter-first).
std::string placement_name(const Candidate& c) {
  if (c.point.stage_placement.empty()) return std::string(to_string(c.point.placement));
  std::string out;
  for (PlacementPolicy p : c.point.stage_placement)
    out += fmt::format(
        "{}{}", out.empty() ? "" : "-",
        static_cast<char>(std::toupper(static_cast<unsigned char>(to_string(p).front()))));
  return out;
}
std::string row(const std::string& rank, const Candidate& c) {
  return fmt::format("{:>5}  {:<18} {:<16} {:>4} {:<13} {:>11} {:>11} {:>12} {:>11}  {}\n", rank,
                     schedule_name(c), layout(c), c.point.micro_batch, placement_name(c),
                     format_time(Time::ps(std::llround(c.iteration_s * 1e12))),
                     format_time(Time::ps(std::llround(c.estimate_s * 1e12))),
                     fmt::format("{:.1f}", c.throughput), format_bytes(c.peak_memory),
                     c.oom     ? "OUT OF MEMORY"
                     : c.tight ? "PAST THE HEADROOM: " + c.why
                               : c.why);
}
// The proven bound and how far the best is above it.
std::string bound_line(const Plan& p) {
  if (p.lower_bound_s <= 0) return "";
  // (Past 106 days a time no longer fits in picoseconds: in seconds then.)
  const std::string bound = p.lower_bound_s < 9e6
                                ? format_time(Time::ps(std::llround(p.lower_bound_s * 1e12)))
                                : fmt::format("{:.4g} s", p.lower_bound_s);
  const std::optional<double> gap = optimality_gap(p);
  // Plans that fit rank first: if the first does not, none of the space does.
  if (p.exhaustive && !p.candidates.empty() && !p.candidates.front().fits())
    return "exhaustive: no plan of the space fits in the GPUs' memory (every plan's memory "
           "floor passes it)\n";
  if (p.exhaustive)
    return fmt::format(
        "exhaustive: no plan of the space that fits is faster than the best{} (lower bound "
        "{})\n",
        p.tolerance > 0 ? fmt::format(" by more than {:.2g} %", 100 * p.tolerance) : "", bound);
  return fmt::format(
      "lower bound {}: no plan of the space is faster{}\n", bound,
      gap ? fmt::format("; the best is at most {:.1f} % slower than the optimum", 100 * *gap) : "");
}
}  // namespace

// The user's strategies: one that beats the planner first of all, then each with its rank.
std::string compared_lines(const Plan& p, bool beaten) {
  std::string out;
  for (size_t i = 0; i < p.compared.size(); ++i) {
    const Compared& c = p.compared[i];
    const bool beats = c.result.fits() && c.regret < 0;
    if (beats != beaten) continue;
    const std::string time = format_time(Time::ps(std::llround(c.result.iteration_s * 1e12)));
    if (beats) {
      out += fmt::format(
          "your strategy {} beats the planner's best by {:.1f} % ({} per iteration): {}\n", i + 1,
          -100 * c.regret, time, c.given);
    } else {
      out += fmt::format(
          "compared {}: rank {} of the plans simulated, {} per iteration ({:+.1f} % against the "
          "best), {}{}: {}\n",
          i + 1, c.rank, time, 100 * c.regret, format_bytes(c.result.peak_memory),
          c.result.oom ? ", OUT OF MEMORY" : "", c.given);
    }
  }
  return out;
}

std::string plan_table(const Plan& p) {
  std::string out = compared_lines(p, true);
  out += fmt::format("{:>5}  {:<18} {:<16} {:>4} {:<13} {:>11} {:>11} {:>12} {:>11}  {}\n", "rank",
                     "schedule", "replicas x data", "mb", "placement", "iteration", "estimate",
                     "samples/s", "peak mem", "bound by");
  for (size_t i = 0; i < p.candidates.size(); ++i)
    out += row(std::to_string(i + 1), p.candidates[i]);
  out += "\nPareto front (iteration time vs peak memory):\n";
  for (const Candidate& c : p.pareto) out += row("", c);
  if (!p.baselines.empty()) {
    out += "\nbaselines (same simulator):\n";
    std::string summary;
    for (const Baseline& b : p.baselines) {
      if (!b.result) {
        out += fmt::format("{:>5}  {}: {}\n", "", b.name, b.error);
        continue;
      }
      out += row(b.name == "data_parallel" ? "dp" : b.name.substr(0, 5), *b.result);
      if (!p.candidates.empty() && !b.result->oom && b.result->throughput > 0) {
        summary += fmt::format("{}{}'s by {:.2f}x", summary.empty() ? "" : ", ",
                               b.name == "data_parallel" ? "data parallel" : b.name,
                               p.candidates.front().throughput / b.result->throughput);
      }
    }
    if (!summary.empty()) out += "best beats " + summary + "\n";
  }
  out += fmt::format(
      "\n{} strategies costed, {} simulated in {:.2f} s{}{}{}; estimate error {:.1f} % mean, "
      "{:.1f} "
      "% "
      "max\n",
      p.explored, p.simulated, p.wall_s, p.timed_out ? " (time limit reached)" : "",
      p.too_large > 0 ? fmt::format(", {} too large to simulate", p.too_large) : "",
      p.over_budget > 0 ? fmt::format(", {} left out by the simulation budget", p.over_budget) : "",
      100 * p.estimate_error_mean, 100 * p.estimate_error_max);
  out += compared_lines(p, false);
  out += bound_line(p);
  if (!p.candidates.empty()) {
    const Candidate& b = p.candidates.front();
    out += "best strategy: " + json_text(b.strategy) + "\n";
    if (b.micro_batch) out += fmt::format("with training.micro_batch: {}\n", *b.micro_batch);
  }
  return out;
}

std::vector<std::string> memory_warnings(const Plan& p) {
  // Under --headroom the user chose the margin, and the ranking keeps to it.
  if (p.candidates.empty() || p.capacity_bytes <= 0 || p.headroom > 0) return {};
  const auto share = [&](const Candidate& c) {
    return static_cast<double>(c.peak_memory) / static_cast<double>(p.capacity_bytes);
  };
  const Candidate& best = p.candidates.front();
  if (best.oom || share(best) < kTightMemory) return {};
  std::string alternative = fmt::format("none of the {} ranked leaves {:.0f} % free",
                                        p.candidates.size(), 100 * (1 - kHeadroom));
  for (size_t i = 1; i < p.candidates.size(); ++i) {
    const Candidate& c = p.candidates[i];
    if (!c.oom && share(c) <= kHeadroom) {
      alternative = fmt::format(
          "rank {} leaves {:.0f} % free at {:.1f} samples/s ({:.1f} % slower)", i + 1,
          100 * (1 - share(c)), c.throughput, 100 * (1 - c.throughput / best.throughput));
      break;
    }
  }
  return {fmt::format(
      "the best plan holds {:.1f} % of the GPUs' memory ({} of {}): allocator fragmentation, "
      "NCCL buffers and the CUDA context (cluster.gpu.reserved) may not fit; {}",
      100 * share(best), format_bytes(best.peak_memory), format_bytes(p.capacity_bytes),
      alternative)};
}

}  // namespace pipesim
