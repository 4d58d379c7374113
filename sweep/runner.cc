#include "sweep/runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "core/error.h"
#include "parallel/distributed.h"
#include "scenario/setup.h"
#include "sim/engine.h"
#include "sim/report.h"
#include "sweep/sweep.h"

namespace pipesim {
PointReport summarize(const Report& r) {
  int64_t peak = 0;
  for (const DeviceReport& d : r.devices) peak = std::max(peak, d.peak_memory);
  return PointReport{
      .scenario = r.info.scenario,
      .schedule = r.info.schedule,
      .makespan_s = r.makespan.seconds(),
      .iteration_time_s = r.iteration_time.seconds(),
      .throughput_samples_per_s = r.throughput,
      .peak_memory_bytes = peak,
      .oom = r.oom.oom,
      .oom_message = r.oom_message,
      .bubble_fraction = r.bubble_fraction,
      .mfu = r.mfu,
      .model_tflops_per_gpu = r.model_tflops_per_gpu,
      .hardware_tflops_per_gpu = r.hardware_tflops_per_gpu,
      .tokens_per_s = r.tokens_per_s,
      .goodput = r.goodput ? std::optional(r.goodput->goodput) : std::nullopt,
      .checkpoint_every_optimal_s =
          r.goodput ? std::optional(r.goodput->checkpoint_every_optimal_s) : std::nullopt,
      .gpus = r.info.gpus,
      .events = r.events};
}

namespace {

using Clock = std::chrono::steady_clock;

// The swept keys; a report field would be written twice in a point's row.
std::vector<std::string> swept_keys(const std::vector<GridAxis>& axes) {
  std::vector<std::string> keys;
  for (const GridAxis& a : axes) {
    if (std::find(std::begin(kSweepFields), std::end(kSweepFields), a.key) !=
        std::end(kSweepFields))
      throw InputError(fmt::format("{}: is a report field, not a scenario key", a.key),
                       "a dotted scenario key such as training.micro_batch", "", {"--grid"});
    keys.push_back(a.key);
  }
  return keys;
}

// One point, as `pipesim run --reproducible` with the same overrides would simulate it.
SweepPoint run_point(const ScenarioDocument& doc, const Grid& grid, const SweepOptions& o,
                     size_t i) {
  SweepPoint p;
  std::vector<Override> with = o.sets;
  for (Override& v : grid.overrides(i)) {
    p.values.push_back(v.value);
    with.push_back(std::move(v));
  }
  try {
    const Scenario sc = doc.load(with);
    const TaskGraph graph = folded_task_graph(sc);
    const Timeline tl = simulate(graph, sc.cluster);
    p.report = summarize(make_report(graph, sc.cluster, tl, run_info(sc, 0.0, with)));
  } catch (InputError& e) {
    e.set_location_if_empty({doc.source()});
    p.error = e.message();
  }
  return p;
}

// "swept 120/400 points, 35.2 points/s", at most once a second and at the end.
class Progress {
 public:
  Progress(std::ostream* out, const JobRanks& job) : out_(job.rank == 0 ? out : nullptr) {
    if (job.size > 1) prefix_ = fmt::format("rank 0 of {}: ", job.size);
  }
  void update(size_t done, size_t here) {
    if (out_ == nullptr) return;
    const auto now = Clock::now();
    if (done < here && now - last_ < std::chrono::seconds(1)) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    *out_ << fmt::format("{}swept {}/{} points, {:.1f} points/s\n", prefix_, done, here,
                         s > 0 ? static_cast<double>(done) / s : 0.0)
          << std::flush;
  }

 private:
  std::ostream* out_;
  std::string prefix_;
  Clock::time_point start_ = Clock::now(), last_ = start_;
};

}  // namespace

Sweep run_sweep(const std::string& scenario_path, const std::vector<GridAxis>& axes,
                const SweepOptions& options) {
  // The grid's errors before the file's.
  const Grid grid(axes, options.zip);
  swept_keys(axes);
  return run_sweep(ScenarioDocument(scenario_path), axes, options);
}

Sweep run_sweep(const ScenarioDocument& doc, const std::vector<GridAxis>& axes,
                const SweepOptions& options) {
  const Grid grid(axes, options.zip);
  Sweep s;
  s.scenario_file = doc.source();
  s.zip = options.zip;
  s.sets = options.sets;
  s.keys = swept_keys(axes);
  s.points.resize(grid.size());
  const JobRanks job = job_ranks();
  Progress progress(options.progress, job);
  DistributedFor work;
  work.count = grid.size();
  work.threads = options.threads;
  work.run = [&](size_t i) { s.points[i] = run_point(doc, grid, options, i); };
  // Between MPI ranks a point travels as its JSON form in CBOR (exact doubles); its
  // values as given come from the grid itself.
  work.save = [&](size_t i) {
    const std::vector<uint8_t> b = nlohmann::ordered_json::to_cbor(point_json(s, s.points[i]));
    return std::string(b.begin(), b.end());
  };
  work.load = [&](size_t i, std::string_view bytes) {
    SweepPoint p = point_from_json(nlohmann::ordered_json::from_cbor(bytes.begin(), bytes.end()));
    for (Override& v : grid.overrides(i)) p.values.push_back(std::move(v.value));
    s.points[i] = std::move(p);
  };
  work.progress = [&](size_t done, size_t here) { progress.update(done, here); };
  distributed_for(work);
  for (const SweepPoint& p : s.points) {
    s.failed += !p.error.empty();
    s.out_of_memory += p.report && p.report->oom;
  }
  return s;
}

}  // namespace pipesim
