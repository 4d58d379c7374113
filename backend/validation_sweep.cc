#include "backend/validation_sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <ostream>

#include "backend/stats.h"
#include "scenario/work_estimate.h"

namespace pipesim {
namespace {

// Before any point runs: every point loads (a scenario with `stages:` cannot take the
// sweep's `pipeline`), and the ops every run executes stay within kMaxValidationOps (a
// backend runs each op for real, about a millisecond of wall time each on the host).
template <typename Point>
void check_sweep_work(const ScenarioDocument& doc, const std::string& file,
                      const ValidationGrid& grid, const ValidateOptions& options,
                      const Point& point) {
  const double runs = 2.0 * options.iterations + options.warmup + (options.calibrate ? 1 : 0);
  double total = 0;
  for (const std::string& link : grid.links) {
    for (const std::string& schedule : grid.schedules) {
      for (int stages : grid.stages) {
        for (int m : grid.micro_batches) {
          try {
            total += estimate_work(doc.load(point(link, schedule, stages, m))).ops();
          } catch (InputError& e) {
            if (e.key() == "strategy.stages" &&
                std::string(e.what()).find("not both") != std::string::npos)
              throw InputError(
                  "validate --sweep sets strategy.pipeline, and this scenario gives stages",
                  "a scenario with 'pipeline: N' (e.g. scenarios/validation/backend-sweep.yaml)",
                  "strategy.stages", {file, 0, 0});
            throw;
          }
        }
      }
    }
  }
  if (total * runs > kMaxValidationOps)
    throw InputError(
        fmt::format("the sweep would execute about {:.3g} ops on the backend ({:.3g} ops x {:.0f} "
                    "runs)",
                    total * runs, total, runs),
        fmt::format("at most {:.3g}; fewer or smaller --micro-batches, --stages or --iterations",
                    kMaxValidationOps),
        "--micro-batches", {"<command line>"});
}

}  // namespace

ValidationSweep validation_sweep(const std::string& file, const std::vector<Override>& overrides,
                                 const ValidationGrid& grid, const ExecutorFactory& make,
                                 const ValidateOptions& options, std::ostream* progress) {
  ValidationSweep r;
  const ScenarioDocument doc(file);  // read once, for every point
  const Scenario base = doc.load(overrides);
  const int64_t per_micro = base.training.micro_batch * base.strategy.data;
  const auto point = [&](const std::string& link, const std::string& schedule, int stages, int m) {
    std::vector<Override> o = overrides;
    o.push_back({"strategy.schedule", schedule});
    o.push_back({"strategy.pipeline", std::to_string(stages)});
    o.push_back({"training.global_batch", std::to_string(per_micro * m)});
    o.push_back({grid.link_key, link});
    return o;
  };
  check_sweep_work(doc, file, grid, options, point);
  for (const std::string& link : grid.links) {
    for (const std::string& schedule : grid.schedules) {
      for (int stages : grid.stages) {
        for (int m : grid.micro_batches) {
          const Scenario s = doc.load(point(link, schedule, stages, m));
          const std::unique_ptr<Executor> e = make(s);
          ValidationPoint p{schedule, link, stages, m, validate(s, *e, options)};
          if (progress != nullptr) {
            *progress << fmt::format(
                "{} S={} M={} link {}: measured {:.4g} s, predicted {:+.1f} %, replay {:+.1f} "
                "%{}\n",
                schedule, stages, m, link, p.v.measured_s,
                (p.v.predicted_s / p.v.measured_s - 1) * 100,
                (p.v.replay_s / p.v.measured_s - 1) * 100,
                p.v.calibrated ? fmt::format(", calibrated {:+.1f} %",
                                             (p.v.calibrated_s / p.v.measured_s - 1) * 100)
                               : "");
          }
          r.points.push_back(std::move(p));
        }
      }
    }
  }
  std::vector<double> measured, predicted, replay, calibrated, pe, re, ce;
  for (const ValidationPoint& p : r.points) {
    measured.push_back(p.v.measured_s);
    predicted.push_back(p.v.predicted_s);
    replay.push_back(p.v.replay_s);
    calibrated.push_back(p.v.calibrated_s);
    pe.push_back(p.v.predicted_error);
    re.push_back(p.v.replay_error);
    ce.push_back(p.v.calibrated_error);
  }
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0 : sum / static_cast<double>(v.size());
  };
  auto most = [](const std::vector<double>& v) {
    return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
  };
  r.predicted_mape = mean(pe);
  r.predicted_max_error = most(pe);
  r.replay_mape = mean(re);
  r.replay_max_error = most(re);
  r.kendall_tau = kendall_tau(predicted, measured);
  r.replay_kendall_tau = kendall_tau(replay, measured);
  r.calibrated = options.calibrate;
  if (r.calibrated) {
    r.calibrated_mape = mean(ce);
    r.calibrated_max_error = most(ce);
    r.calibrated_kendall_tau = kendall_tau(calibrated, measured);
  }
  return r;
}

nlohmann::ordered_json to_json(const ValidationSweep& r) {
  nlohmann::ordered_json j;
  j["summary"] = {{"configurations", r.points.size()},
                  {"predicted_mape", r.predicted_mape},
                  {"predicted_max_error", r.predicted_max_error},
                  {"replay_mape", r.replay_mape},
                  {"replay_max_error", r.replay_max_error},
                  {"kendall_tau", r.kendall_tau},
                  {"replay_kendall_tau", r.replay_kendall_tau}};
  if (r.calibrated) {
    j["summary"]["calibrated_mape"] = r.calibrated_mape;
    j["summary"]["calibrated_max_error"] = r.calibrated_max_error;
    j["summary"]["calibrated_kendall_tau"] = r.calibrated_kendall_tau;
  }
  auto points = nlohmann::ordered_json::array();
  for (const ValidationPoint& p : r.points) {
    nlohmann::ordered_json v = to_json(p.v);
    v["link"] = p.link;
    points.push_back(v);
  }
  j["configurations"] = points;
  return j;
}

std::string validation_sweep_table(const ValidationSweep& r) {
  std::string out =
      fmt::format("{:<10} {:>2} {:>3} {:>10} {:>12} {:>10} {:>10} {:>8}\n", "schedule", "S", "M",
                  "link", "measured", "predicted", "replay", "noise");
  for (const ValidationPoint& p : r.points) {
    out += fmt::format("{:<10} {:>2} {:>3} {:>10} {:>10.4g} s {:>+9.1f}% {:>+9.1f}% {:>7.2f}%\n",
                       p.schedule, p.stages, p.micro_batches, p.link, p.v.measured_s,
                       (p.v.predicted_s / p.v.measured_s - 1) * 100,
                       (p.v.replay_s / p.v.measured_s - 1) * 100, p.v.noise_floor * 100);
  }
  out += fmt::format(
      "predicted   MAPE {:.2f} %, max {:.2f} %, Kendall tau {:.3f}\n"
      "replay      MAPE {:.2f} %, max {:.2f} %, Kendall tau {:.3f}\n",
      r.predicted_mape * 100, r.predicted_max_error * 100, r.kendall_tau, r.replay_mape * 100,
      r.replay_max_error * 100, r.replay_kendall_tau);
  if (r.calibrated) {
    out += fmt::format("calibrated  MAPE {:.2f} %, max {:.2f} %, Kendall tau {:.3f}\n",
                       r.calibrated_mape * 100, r.calibrated_max_error * 100,
                       r.calibrated_kendall_tau);
  }
  return out;
}

}  // namespace pipesim
