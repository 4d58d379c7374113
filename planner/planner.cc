#include "planner/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/units.h"
#include "scenario/setup.h"
#include "schedules/partition.h"
#include "sim/engine.h"
#include "sim/report.h"

namespace pipesim {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int k = 1; k <= n; ++k)
    if (n % k == 0) out.push_back(k);
  return out;
}

// The schedules tried: the scenario's own, and for synchronous training the two ends of
// DAPPLE's trade-off, early-backward 1F1B (low memory) and GPipe with re-computation
// (lowest memory); asynchronous training compares PipeDream with 2BW. Strategy keys other
// than the split (all-reduce algorithm, buckets, a placement policy) are kept.
std::vector<ScheduleKind> schedules_for(ScheduleKind own) {
  std::vector<ScheduleKind> out{own};
  const std::vector<ScheduleKind> more =
      is_async(own)
          ? std::vector<ScheduleKind>{ScheduleKind::kPipeDream, ScheduleKind::kPipeDream2BW}
          : std::vector<ScheduleKind>{ScheduleKind::kDapple, ScheduleKind::kGpipe,
                                      ScheduleKind::kGpipeRecompute};
  for (const ScheduleKind k : more)
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  return out;
}

}  // namespace

Plan plan(const std::string& file, const std::vector<Override>& overrides,
          const PlanOptions& options) {
  const Scenario base = load_scenario(file, overrides);
  const int gpus = base.cluster.num_devices();
  const int layers = static_cast<int>(base.model.layers.size());
  Plan result;
  for (const int data : divisors(gpus)) {
    if (base.training.global_batch % (base.training.micro_batch * data) != 0) continue;
    const int64_t micro_batches = base.training.global_batch / (base.training.micro_batch * data);
    for (const int replicas : divisors(gpus / data)) {
      const int pipeline = gpus / data / replicas;
      for (const ScheduleKind kind : schedules_for(base.strategy.schedule)) {
        // An interleaved schedule keeps the scenario's chunks per device.
        const int chunks = kind == ScheduleKind::kInterleaved ? base.strategy.virtual_stages : 1;
        if (pipeline * chunks > layers) continue;
        const std::vector<StageSpec> stages =
            even_partition(base.model, pipeline * chunks, replicas);
        nlohmann::ordered_json st;
        st["schedule"] = std::string(to_string(kind));
        st["stages"] = nlohmann::ordered_json::array();
        for (const StageSpec& s : stages) {
          st["stages"].push_back({{"layers", fmt::format("{}-{}", s.first_layer, s.last_layer)},
                                  {"replicas", replicas}});
        }
        st["data"] = data;
        if (base.strategy.allreduce)
          st["allreduce"] = std::string(to_string(*base.strategy.allreduce));
        if (base.strategy.bucket_bytes != Strategy{}.bucket_bytes)
          st["bucket"] = fmt::format("{} B", base.strategy.bucket_bytes);
        if (base.strategy.bucket_buffers) st["bucket_buffers"] = true;
        if (chunks > 1) st["virtual_stages"] = chunks;
        if (!base.explicit_placement && base.placement_policy != PlacementPolicy::kAppendFirst)
          st["placement"] = std::string(to_string(base.placement_policy));
        const double ops =
            static_cast<double>(micro_batches) * gpus * chunks * 3 * base.training.iterations;
        if (ops > static_cast<double>(options.max_ops)) {
          ++result.skipped;
          continue;
        }
        std::vector<Override> with = overrides;
        with.push_back({"strategy", st.dump()});
        std::optional<Scenario> sc;
        std::optional<TaskGraph> graph;
        try {
          sc.emplace(load_scenario(file, with));
          graph.emplace(scenario_task_graph(*sc));
        } catch (const InputError&) {
          ++result.rejected;  // e.g. a micro-batch that does not split across the replicas
          continue;
        }
        const Timeline tl = simulate(*graph, sc->cluster);
        const RunInfo info{sc->name,
                           std::string(to_string(kind)),
                           sc->training.global_batch,
                           sc->training.iterations,
                           is_async(kind),
                           0.0};
        const Report rep = make_report(*graph, sc->cluster, tl, info);
        Candidate c;
        c.strategy = std::move(st);
        c.pipeline = pipeline;
        c.replicas = replicas;
        c.data = data;
        c.micro_batches = micro_batches;
        c.schedule = std::string(to_string(kind));
        c.makespan_s = rep.makespan.seconds();
        c.throughput = rep.throughput;
        for (const DeviceReport& d : rep.devices)
          c.peak_memory = std::max(c.peak_memory, d.peak_memory);
        c.oom = rep.oom.oom;
        result.candidates.push_back(std::move(c));
        ++result.evaluated;
      }
    }
  }
  // Fitting candidates by throughput (ties: less memory), then the rest by memory.
  std::stable_sort(result.candidates.begin(), result.candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (a.oom != b.oom) return !a.oom;
                     if (!a.oom && a.throughput != b.throughput) return a.throughput > b.throughput;
                     return a.peak_memory < b.peak_memory;
                   });
  if (result.candidates.size() > static_cast<size_t>(options.top))
    result.candidates.resize(static_cast<size_t>(options.top));
  return result;
}

nlohmann::ordered_json to_json(const Plan& p) {
  nlohmann::ordered_json j;
  auto one = [](const Candidate& c) {
    return nlohmann::ordered_json{{"strategy", c.strategy},
                                  {"makespan_s", c.makespan_s},
                                  {"throughput_samples_per_s", c.throughput},
                                  {"peak_memory_bytes", c.peak_memory},
                                  {"oom", c.oom},
                                  {"pipeline", c.pipeline},
                                  {"replicas", c.replicas},
                                  {"data", c.data},
                                  {"micro_batches", c.micro_batches}};
  };
  j["candidates"] = nlohmann::ordered_json::array();
  for (const Candidate& c : p.candidates) j["candidates"].push_back(one(c));
  j["best"] = p.candidates.empty() ? nlohmann::ordered_json(nullptr) : one(p.candidates.front());
  j["evaluated"] = p.evaluated;
  j["rejected"] = p.rejected;
  j["skipped"] = p.skipped;
  return j;
}

std::string plan_table(const Plan& p) {
  std::string out = fmt::format("{:>4}  {:<16} {:>8} {:>8} {:>5} {:>6} {:>12} {:>14} {:>12}  {}\n",
                                "rank", "schedule", "pipeline", "replicas", "data", "M", "makespan",
                                "samples/s", "peak mem", "oom");
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    const Candidate& c = p.candidates[i];
    out +=
        fmt::format("{:>4}  {:<16} {:>8} {:>8} {:>5} {:>6} {:>12} {:>14.1f} {:>12}  {}\n", i + 1,
                    c.schedule, c.pipeline, c.replicas, c.data, c.micro_batches,
                    format_time(Time::ps(static_cast<int64_t>(std::llround(c.makespan_s * 1e12)))),
                    c.throughput, format_bytes(c.peak_memory), c.oom ? "yes" : "no");
  }
  out += fmt::format("{} strategies simulated, {} invalid for this scenario, {} too large to try\n",
                     p.evaluated, p.rejected, p.skipped);
  if (!p.candidates.empty()) out += "best strategy: " + p.candidates.front().strategy.dump() + "\n";
  return out;
}

}  // namespace pipesim
