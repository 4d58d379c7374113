// Sweep outputs: JSON, CSV and the table on standard output.
#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "core/units.h"
#include "sweep/sweep.h"

namespace pipesim {
namespace {

using nlohmann::ordered_json;

// A swept value as JSON: a number when it reads as one, else the string as given.
ordered_json value_json(const std::string& v) {
  const char* b = v.data();
  const char* e = b + v.size();
  int64_t i = 0;
  if (auto [p, ec] = std::from_chars(b, e, i); ec == std::errc() && p == e) return i;
  double d = 0;
  if (auto [p, ec] = std::from_chars(b, e, d); ec == std::errc() && p == e && std::isfinite(d))
    return d;
  return v;
}

ordered_json maybe(const std::optional<double>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

std::optional<double> maybe_double(const ordered_json& j) {
  return j.is_null() ? std::nullopt : std::optional<double>(j.get<double>());
}

// RFC 4180: quoted when it holds a comma, quote or line break; quotes doubled.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string fixed_or_empty(const std::optional<double>& v) {
  return v ? fmt::format("{}", *v) : std::string();
}

}  // namespace

ordered_json point_json(const Sweep& s, const SweepPoint& p) {
  ordered_json j;
  for (size_t k = 0; k < s.keys.size() && k < p.values.size(); ++k)
    j[s.keys[k]] = value_json(p.values[k]);
  const PointReport* r = p.report ? &*p.report : nullptr;
  const ordered_json null;
  j["makespan_s"] = r ? ordered_json(r->makespan_s) : null;
  j["iteration_time_s"] = r ? ordered_json(r->iteration_time_s) : null;
  j["throughput_samples_per_s"] = r ? ordered_json(r->throughput_samples_per_s) : null;
  j["peak_memory_bytes"] = r ? ordered_json(r->peak_memory_bytes) : null;
  j["oom"] = r ? ordered_json(r->oom) : null;
  j["bubble_fraction"] = r ? ordered_json(r->bubble_fraction) : null;
  j["mfu"] = r ? maybe(r->mfu) : null;
  j["error"] = r ? null : ordered_json(p.error);
  if (r == nullptr) return j;
  j["scenario"] = r->scenario;
  j["schedule"] = r->schedule;
  j["gpus"] = r->gpus;
  j["model_tflops_per_gpu"] = maybe(r->model_tflops_per_gpu);
  j["hardware_tflops_per_gpu"] = maybe(r->hardware_tflops_per_gpu);
  j["tokens_per_s"] = maybe(r->tokens_per_s);
  if (r->goodput) {
    j["goodput"] = *r->goodput;
    j["checkpoint_every_optimal_s"] = maybe(r->checkpoint_every_optimal_s);
  }
  if (r->oom) j["oom_message"] = r->oom_message;
  j["events"] = r->events;
  return j;
}

SweepPoint point_from_json(const ordered_json& j) {
  SweepPoint p;
  if (!j.at("error").is_null()) {
    p.error = j["error"].get<std::string>();
    return p;
  }
  PointReport r;
  r.scenario = j.at("scenario").get<std::string>();
  r.schedule = j.at("schedule").get<std::string>();
  r.makespan_s = j.at("makespan_s").get<double>();
  r.iteration_time_s = j.at("iteration_time_s").get<double>();
  r.throughput_samples_per_s = j.at("throughput_samples_per_s").get<double>();
  r.peak_memory_bytes = j.at("peak_memory_bytes").get<int64_t>();
  r.oom = j.at("oom").get<bool>();
  if (r.oom) r.oom_message = j.at("oom_message").get<std::string>();
  r.bubble_fraction = j.at("bubble_fraction").get<double>();
  r.mfu = maybe_double(j.at("mfu"));
  r.gpus = j.at("gpus").get<int>();
  r.model_tflops_per_gpu = maybe_double(j.at("model_tflops_per_gpu"));
  r.hardware_tflops_per_gpu = maybe_double(j.at("hardware_tflops_per_gpu"));
  r.tokens_per_s = maybe_double(j.at("tokens_per_s"));
  if (j.contains("goodput")) {
    r.goodput = maybe_double(j.at("goodput"));
    r.checkpoint_every_optimal_s = maybe_double(j.at("checkpoint_every_optimal_s"));
  }
  r.events = j.at("events").get<uint64_t>();
  p.report = std::move(r);
  return p;
}

ordered_json to_json(const Sweep& s) {
  ordered_json j;
  j["scenario_file"] = s.scenario_file;
  j["keys"] = s.keys;
  j["zip"] = s.zip;
  ordered_json sets = ordered_json::object();
  for (const Override& o : s.sets) sets[o.key] = o.value;
  j["overrides"] = sets;
  ordered_json points = ordered_json::array();
  for (const SweepPoint& p : s.points) points.push_back(point_json(s, p));
  j["points"] = std::move(points);
  j["count"] = s.points.size();
  j["failed"] = s.failed;
  j["out_of_memory"] = s.out_of_memory;
  j["version"] = PIPESIM_VERSION;
  return j;
}

void write_sweep_csv(std::ostream& out, const Sweep& s) {
  std::string line;
  for (const std::string& k : s.keys) line += csv_field(k) + ",";
  for (const char* f : kSweepFields)
    line += std::string(f) + (f == std::string("error") ? "" : ",");
  out << line << "\n";
  for (const SweepPoint& p : s.points) {
    line.clear();
    for (const std::string& v : p.values) line += csv_field(v) + ",";
    if (const PointReport* r = p.report ? &*p.report : nullptr) {
      line += fmt::format("{},{},{},{},{},{},{},", r->makespan_s, r->iteration_time_s,
                          r->throughput_samples_per_s, r->peak_memory_bytes, r->oom,
                          r->bubble_fraction, fixed_or_empty(r->mfu));
    } else {
      line += ",,,,,,," + csv_field(p.error);
    }
    out << line << "\n";
  }
}

std::string sweep_table(const Sweep& s, size_t rows) {
  std::vector<size_t> width;
  for (size_t k = 0; k < s.keys.size(); ++k) {
    size_t w = s.keys[k].size();
    for (size_t i = 0; i < s.points.size() && i < rows; ++i)
      w = std::max(w, s.points[i].values[k].size());
    width.push_back(std::min<size_t>(w, 40));
  }
  std::string out;
  for (size_t k = 0; k < s.keys.size(); ++k) out += fmt::format("{:<{}}  ", s.keys[k], width[k]);
  out += fmt::format("{:>14} {:>14} {:>12} {:>7}  {}\n", "samples/s", "iteration", "peak memory",
                     "bubble", "note");
  const PointReport* best = nullptr;
  size_t best_index = 0;
  for (size_t i = 0; i < s.points.size(); ++i) {
    const SweepPoint& p = s.points[i];
    const PointReport* r = p.report ? &*p.report : nullptr;
    if (r && !r->oom && (!best || r->throughput_samples_per_s > best->throughput_samples_per_s)) {
      best = r;
      best_index = i;
    }
    if (i >= rows) continue;
    for (size_t k = 0; k < s.keys.size(); ++k) {
      std::string v = p.values[k];
      if (v.size() > width[k]) v = v.substr(0, width[k] - 3) + "...";
      out += fmt::format("{:<{}}  ", v, width[k]);
    }
    if (r == nullptr) {
      out += fmt::format("{:>14} {:>14} {:>12} {:>7}  error: {}\n", "-", "-", "-", "-", p.error);
      continue;
    }
    out += fmt::format("{:>14.1f} {:>14} {:>12} {:>6.1f}%  {}\n", r->throughput_samples_per_s,
                       format_time(Time::ps(static_cast<int64_t>(r->iteration_time_s * 1e12))),
                       format_bytes(r->peak_memory_bytes), 100 * r->bubble_fraction,
                       r->oom ? "out of memory" : "");
  }
  if (s.points.size() > rows)
    out += fmt::format("... {} more points (all are in --csv / --json)\n", s.points.size() - rows);
  out += fmt::format("{} points, {} failed, {} out of memory", s.points.size(), s.failed,
                     s.out_of_memory);
  if (best != nullptr) {
    std::string at;
    for (size_t k = 0; k < s.keys.size(); ++k)
      at += fmt::format("{}{}={}", k ? " " : "", s.keys[k], s.points[best_index].values[k]);
    out += fmt::format("; best {:.1f} samples/s at {}", best->throughput_samples_per_s, at);
  }
  return out + "\n";
}

}  // namespace pipesim
