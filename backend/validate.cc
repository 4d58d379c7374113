#include "backend/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "backend/stats.h"
#include "backend/work.h"
#include "core/error.h"
#include "core/units.h"
#include "scenario/setup.h"
#include "scenario/work_estimate.h"
#include "sim/engine.h"

namespace pipesim {

TaskGraph with_durations(const TaskGraph& g, const std::vector<Time>& durations) {
  PIPESIM_ASSERT(durations.size() == g.size(), "one duration per op");
  TaskGraphBuilder b(g.num_devices());
  b.reserve(g.size(), g.num_deps());
  // Ops are added in id order, which is each stream's order (TaskGraphBuilder::add).
  for (OpId id = 0; id < g.size(); ++id) {
    Op op = g.op(id);
    if (is_compute(op.kind)) op.duration = durations[id];
    b.add(op);
  }
  for (OpId id = 0; id < g.size(); ++id) {
    for (OpId d : g.deps(id)) b.add_dep(id, d);
  }
  for (int d = 0; d < g.num_devices(); ++d) {
    const MemBreakdown& m = g.static_memory(d);
    for (int c = 0; c < kMemCategories; ++c) {
      if (m[static_cast<size_t>(c)] != 0)
        b.add_static_memory(d, static_cast<MemCategory>(c), m[static_cast<size_t>(c)]);
    }
  }
  TaskGraph out = std::move(b).build();
  for (int d = 0; d < g.num_devices(); ++d) {
    const auto a = g.stream(d), c = out.stream(d);
    PIPESIM_ASSERT(std::equal(a.begin(), a.end(), c.begin(), c.end()), "stream order kept");
  }
  return out;
}

double bubble_fraction(const TaskGraph& g, const std::vector<Time>& start,
                       const std::vector<Time>& end) {
  Time makespan;
  for (OpId id = 0; id < g.size(); ++id) makespan = max(makespan, end[id]);
  double busy = 0;
  int devices = 0;
  for (int d = 0; d < g.num_devices(); ++d) {
    bool pipeline = false;
    for (OpId id : g.stream(d)) {
      busy += (end[id] - start[id]).seconds();
      pipeline |= g.op(id).kind != OpKind::kOptimizer;
    }
    devices += pipeline ? 1 : 0;
  }
  if (devices == 0 || makespan == Time::zero()) return 0;
  return 1.0 - busy / (devices * makespan.seconds());
}

namespace {

// Each compute op's time measured alone (median of `repeats`), once per distinct
// (device, kind, FLOPs, bytes); other ops keep their durations.
std::vector<Time> op_times_alone(const TaskGraph& g, const std::vector<ExecWork>& work,
                                 Executor& e, int repeats) {
  std::map<std::tuple<int, int, double, double>, Time> seen;
  std::vector<Time> d(g.size());
  for (OpId id = 0; id < g.size(); ++id) {
    const Op& op = g.op(id);
    d[id] = op.duration;
    if (!is_compute(op.kind)) continue;
    const auto key = std::make_tuple(op.device, static_cast<int>(op.kind), work[id].flops,
                                     work[id].bytes);
    auto it = seen.find(key);
    if (it == seen.end()) {
      std::vector<double> t;
      for (int i = 0; i < repeats; ++i) t.push_back(e.time_op(op, work[id]).seconds());
      it = seen.emplace(key, time_from_seconds(median(t))).first;
    }
    d[id] = it->second;
  }
  return d;
}

// Per-op medians over the runs: the op error against the TaskGraph's durations and the
// bubble of a timeline laid out from the median starts. Returns the median durations.
std::vector<Time> add_op_medians(const TaskGraph& g, const std::vector<Measurement>& runs,
                                 Validation& v) {
  std::vector<Time> durations(g.size()), start(g.size()), end(g.size());
  std::vector<double> op_errors;
  for (OpId id = 0; id < g.size(); ++id) {
    std::vector<double> d, st;
    for (const Measurement& m : runs) {
      d.push_back((m.end[id] - m.start[id]).seconds());
      st.push_back(m.start[id].seconds());
    }
    durations[id] = time_from_seconds(median(d));
    start[id] = time_from_seconds(median(st));
    end[id] = start[id] + durations[id];
    if (is_compute(g.op(id).kind) && median(d) > 0)
      op_errors.push_back(relative_error(g.op(id).duration.seconds(), median(d)));
  }
  v.op_error_median = median(op_errors);
  v.op_error_p90 = quantile(op_errors, 0.9);
  v.measured_bubble = bubble_fraction(g, start, end);
  return durations;
}

// Measured op times hold whatever slowed them already (cluster.gpu.comm_interference).
SimOptions measured_times() {
  SimOptions o;
  o.comm_interference = false;
  return o;
}

// Replay: each timed run simulated again with that run's own op times, so what is left is
// what the executor adds beyond the TaskGraph (dispatch, wake-ups, link pacing).
void add_replays(const TaskGraph& g, const Cluster& cluster, const std::vector<Measurement>& runs,
                 Validation& v) {
  std::vector<double> replays, replay_errors;
  for (const Measurement& m : runs) {
    std::vector<Time> d(g.size());
    for (OpId id = 0; id < g.size(); ++id) d[id] = m.end[id] - m.start[id];
    const double r =
        simulate(with_durations(g, d), cluster, measured_times()).makespan.seconds();
    replays.push_back(r);
    replay_errors.push_back(relative_error(r, m.makespan.seconds()));
  }
  v.replay_s = median(replays);
  v.replay_error = median(replay_errors);
  v.replay_error_max = quantile(replay_errors, 1.0);
}

// Each device's simulated peak against the highest the runs measured.
void add_peaks(const TaskGraph& g, const Timeline& predicted,
               const std::vector<Measurement>& runs, Validation& v) {
  for (int d = 0; d < g.num_devices(); ++d) {
    if (g.stream(d).empty()) continue;
    DevicePeak p;
    p.simulated = predicted.devices[static_cast<size_t>(d)].peak_memory;
    for (const Measurement& m : runs)
      p.measured = std::max(p.measured, m.peak_memory[static_cast<size_t>(d)]);
    v.peaks_equal &= p.measured == p.simulated;
    v.peaks.push_back(p);
    if (!runs.front().tensor_peak.empty()) {
      int64_t most = 0;
      for (const Measurement& m : runs)
        most = std::max(most, m.tensor_peak.at(static_cast<size_t>(d)));
      v.tensor_peaks.push_back(most);
    }
  }
}

}  // namespace

Validation validate(const Scenario& s, Executor& e, const ValidateOptions& o) {
  // A backend runs every collective step as an op of its own.
  check_work(estimate_work(s), Collectives::kExpanded);
  const TaskGraph g = scenario_task_graph(s);
  if (auto problem = g.validate()) throw InternalError("invalid TaskGraph: " + *problem);
  const std::vector<ExecWork> work = op_work(s, g);
  Validation v;
  v.scenario = s.name;
  v.schedule = std::string(to_string(s.strategy.schedule));
  v.backend = e.name();
  v.backend_description = e.description();
  v.timing_faithful = e.timing_faithful();
  v.time_scale = e.time_scale();
  v.stages = s.strategy.positions();
  v.micro_batches = s.micro_batches;

  for (int i = 0; i < o.warmup; ++i) e.run(g, work);
  std::vector<Measurement> runs;
  for (int i = 0; i < 2 * o.iterations; ++i) runs.push_back(e.run(g, work));
  v.runs = static_cast<int>(runs.size());

  std::vector<double> all, first, second;
  for (size_t i = 0; i < runs.size(); ++i) {
    const double m = runs[i].makespan.seconds();
    all.push_back(m);
    (i < runs.size() / 2 ? first : second).push_back(m);
  }
  v.measured_s = median(all);
  v.noise_floor = v.measured_s > 0 ? std::abs(median(first) - median(second)) / v.measured_s : 0;

  const std::vector<Time> durations = add_op_medians(g, runs, v);
  const Timeline predicted = simulate(g, s.cluster);
  v.predicted_s = predicted.makespan.seconds();
  v.predicted_bubble = bubble_fraction(g, predicted.start, predicted.end);
  add_replays(g, s.cluster, runs, v);
  const TaskGraph replayed = with_durations(g, durations);
  const Timeline replay = simulate(replayed, s.cluster, measured_times());
  v.replay_median_ops_s = replay.makespan.seconds();
  v.replay_bubble = bubble_fraction(replayed, replay.start, replay.end);
  v.predicted_error = relative_error(v.predicted_s, v.measured_s);
  if (o.calibrate) {
    const TaskGraph alone = with_durations(g, op_times_alone(g, work, e, o.calibrate_repeats));
    v.calibrated = true;
    v.calibrated_s = simulate(alone, s.cluster).makespan.seconds();
    v.calibrated_error = relative_error(v.calibrated_s, v.measured_s);
  }

  add_peaks(g, predicted, runs, v);
  return v;
}

nlohmann::ordered_json to_json(const Validation& v) {
  nlohmann::ordered_json j;
  j["scenario"] = v.scenario;
  j["schedule"] = v.schedule;
  j["stages"] = v.stages;
  j["micro_batches"] = v.micro_batches;
  j["backend"] = v.backend;
  j["backend_description"] = v.backend_description;
  j["timing_faithful"] = v.timing_faithful;
  j["time_scale"] = v.time_scale;
  j["timed_runs"] = v.runs;
  j["measured_makespan_s"] = v.measured_s;
  j["noise_floor"] = v.noise_floor;
  j["predicted_makespan_s"] = v.predicted_s;
  j["predicted_error"] = v.predicted_error;
  if (v.calibrated) {
    j["calibrated_makespan_s"] = v.calibrated_s;
    j["calibrated_error"] = v.calibrated_error;
  }
  j["replay_makespan_s"] = v.replay_s;
  j["replay_error"] = v.replay_error;
  j["replay_error_max"] = v.replay_error_max;
  j["replay_median_ops_makespan_s"] = v.replay_median_ops_s;
  j["op_error_median"] = v.op_error_median;
  j["op_error_p90"] = v.op_error_p90;
  j["measured_bubble"] = v.measured_bubble;
  j["predicted_bubble"] = v.predicted_bubble;
  j["replay_bubble"] = v.replay_bubble;
  j["bubble_error"] = v.predicted_bubble - v.measured_bubble;
  auto peaks = nlohmann::ordered_json::array();
  for (const DevicePeak& p : v.peaks)
    peaks.push_back({{"measured_bytes", p.measured}, {"simulated_bytes", p.simulated}});
  j["peak_memory"] = peaks;
  j["peak_memory_equal"] = v.peaks_equal;
  if (!v.tensor_peaks.empty()) j["tensor_peak_bytes"] = v.tensor_peaks;
  return j;
}

std::string validation_table(const Validation& v) {
  std::string out = fmt::format("backend     {}\n", v.backend_description);
  out += fmt::format("scenario    {} ({}, {} stages, {} micro-batches)\n", v.scenario, v.schedule,
                     v.stages, v.micro_batches);
  const double scale = v.time_scale;
  out += fmt::format("measured    {} median of {} runs (wall {}), noise floor {:.2f} %\n",
                     format_time(time_from_seconds(v.measured_s)), v.runs,
                     format_time(time_from_seconds(v.measured_s * scale)), v.noise_floor * 100);
  out += fmt::format("predicted   {}  error {:.2f} %\n",
                     format_time(time_from_seconds(v.predicted_s)), v.predicted_error * 100);
  if (v.calibrated) {
    out += fmt::format("calibrated  {}  error {:.2f} % (each op timed alone)\n",
                       format_time(time_from_seconds(v.calibrated_s)), v.calibrated_error * 100);
  }
  out += fmt::format(
      "replay      {}  error {:.2f} % median over runs, {:.2f} % max (with median op times: {})\n",
      format_time(time_from_seconds(v.replay_s)), v.replay_error * 100, v.replay_error_max * 100,
      format_time(time_from_seconds(v.replay_median_ops_s)));
  out += fmt::format("op times    error median {:.2f} %, p90 {:.2f} %\n", v.op_error_median * 100,
                     v.op_error_p90 * 100);
  out += fmt::format("bubble      measured {:.1f} %, predicted {:.1f} %, replay {:.1f} %\n",
                     v.measured_bubble * 100, v.predicted_bubble * 100, v.replay_bubble * 100);
  out += "peak memory";
  for (size_t d = 0; d < v.peaks.size(); ++d) {
    out += fmt::format("{}{} / {}", d == 0 ? " " : ", ", format_bytes(v.peaks[d].measured),
                       format_bytes(v.peaks[d].simulated));
  }
  out += fmt::format(" (measured / simulated{})\n", v.peaks_equal ? ", equal" : "");
  if (!v.tensor_peaks.empty()) {
    out += "tensors    ";
    for (size_t d = 0; d < v.tensor_peaks.size(); ++d)
      out += fmt::format("{}{}", d == 0 ? " " : ", ", format_bytes(v.tensor_peaks[d]));
    out += " (real tensors held at the peak, per process)\n";
  }
  if (!v.timing_faithful) out += "note        this backend is not timing-faithful\n";
  return out;
}

}  // namespace pipesim
