#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/units.h"

namespace pipesim {

void append_op_label(fmt::memory_buffer& out, const Op& op) {
  auto it = std::back_inserter(out);
  switch (op.kind) {
    case OpKind::kOptimizer:
      fmt::format_to(it, "optimizer");
      return;
    case OpKind::kTransfer:
      fmt::format_to(it, "{}", to_string(op.comm));
      return;
    default:
      break;
  }
  fmt::format_to(it, "{}{}", op_letter(op.kind), op.micro_batch);
  if (op.chunk > 0) fmt::format_to(it, ".c{}", op.chunk);
  if (op.part > 0) fmt::format_to(it, ".p{}", op.part);
}

std::string op_label(const Op& op) {
  fmt::memory_buffer b;
  append_op_label(b, op);
  return fmt::to_string(b);
}

namespace {

// Exposed communication of device d: for each compute op, the part of the idle gap before
// it spent waiting on a transfer itself, from when the stream, every compute dependency and
// the last-arriving transfer's first link were done to when the op started. Waiting for a
// neighbour's computation (the pipeline bubble) is not communication and does not count.
void add_exposed_comm(const TaskGraph& graph, const Timeline& tl, int d, DeviceReport& dr) {
  Time stream_free;
  for (OpId id : graph.stream(d)) {
    Time ready = stream_free;
    OpId last = UINT32_MAX;
    for (OpId dep : graph.deps(id)) {
      if (graph.op(dep).kind != OpKind::kTransfer) {
        ready = max(ready, tl.end[dep]);
      } else if (last == UINT32_MAX || tl.end[dep] > tl.end[last]) {
        last = dep;
      }
    }
    stream_free = tl.end[id];
    if (last == UINT32_MAX) continue;
    // A collective is a chain of transfers (a ring's steps): wait from its first link.
    OpId first = last;
    while (!graph.deps(first).empty() && graph.op(graph.deps(first)[0]).kind == OpKind::kTransfer) {
      first = graph.deps(first)[0];
    }
    ready = max(ready, tl.start[first]);
    if (tl.start[id] <= ready) continue;
    const CommKind kind = graph.op(last).comm;
    (kind == CommKind::kAllToAll ? dr.exposed_all_to_all
     : is_collective(kind)       ? dr.exposed_allreduce
                                 : dr.exposed_pipeline_comm) += tl.start[id] - ready;
  }
}

}  // namespace

Report make_report(const TaskGraph& graph, const Cluster& cluster, const Timeline& timeline,
                   const RunInfo& info) {
  Report r;
  r.info = info;
  r.makespan = timeline.makespan;
  r.iteration_time = info.iterations > 0 ? timeline.makespan / info.iterations : timeline.makespan;
  if (info.asynchronous && info.iterations >= 2) {
    // Steady state without flushes: the mean gap between the completions (last optimizer
    // step anywhere) of consecutive mini-batches, from the first to the last.
    std::vector<Time> done(static_cast<size_t>(info.iterations));
    for (OpId id = 0; id < graph.size(); ++id) {
      const Op& op = graph.op(id);
      if (op.kind == OpKind::kOptimizer && op.iteration < info.iterations) {
        auto& d = done[static_cast<size_t>(op.iteration)];
        d = max(d, timeline.end[id]);
      }
    }
    r.iteration_time = (done.back() - done.front()) / (info.iterations - 1);
  }
  const double seconds = timeline.makespan.seconds();
  if (info.asynchronous && r.iteration_time > Time::zero()) {
    r.throughput = static_cast<double>(info.samples_per_iteration) / r.iteration_time.seconds();
  } else if (seconds > 0) {
    r.throughput = static_cast<double>(info.samples_per_iteration) * info.iterations / seconds;
  }
  r.events = timeline.events;
  r.oom = timeline.oom;

  double busy_pipeline = 0;
  int pipeline_devices = 0;
  // Devices of copies the graph leaves implicit take their built image's figures.
  const auto& figures_of = timeline.figures_of;
  const auto shown_by = [&](int d) {
    return figures_of.empty() ? d : figures_of[static_cast<size_t>(d)];
  };
  r.devices.resize(static_cast<size_t>(cluster.num_devices()));
  for (int d = 0; d < cluster.num_devices(); ++d) {
    if (shown_by(d) != d) continue;
    DeviceReport& dr = r.devices[static_cast<size_t>(d)];
    dr.name = cluster.device(d).name;
    for (OpId id : graph.stream(d)) {
      const Op& op = graph.op(id);
      if (op.kind == OpKind::kOptimizer) continue;
      if (std::find(dr.stages.begin(), dr.stages.end(), op.stage) == dr.stages.end())
        dr.stages.push_back(op.stage);
    }
    std::sort(dr.stages.begin(), dr.stages.end());
    dr.stage = dr.stages.empty() ? -1 : dr.stages.front();
    const DeviceStats& ds = timeline.devices[static_cast<size_t>(d)];
    dr.busy = ds.busy;
    add_exposed_comm(graph, timeline, d, dr);
    dr.peak_memory = ds.peak_memory;
    dr.peak_time = ds.peak_time;
    dr.at_peak = ds.at_peak;
    dr.capacity = cluster.device(d).gpu.memory_bytes;
  }
  for (int d = 0; d < cluster.num_devices(); ++d) {
    DeviceReport& dr = r.devices[static_cast<size_t>(d)];
    if (shown_by(d) != d) {
      dr = r.devices[static_cast<size_t>(shown_by(d))];
      dr.name = cluster.device(d).name;
    }
    if (!dr.stages.empty()) {
      ++pipeline_devices;
      busy_pipeline += timeline.device(d).busy.seconds();
    }
  }
  if (pipeline_devices > 0 && seconds > 0) {
    r.bubble_fraction = 1.0 - busy_pipeline / (pipeline_devices * seconds);
  }
  for (size_t l = 0; l < timeline.num_link_directions(); ++l) {
    const LinkStats ls = timeline.link(static_cast<LinkDirection>(l));
    if (ls.bytes == 0 && ls.busy == Time::zero()) continue;
    r.links.push_back(
        {cluster.direction_name(static_cast<LinkDirection>(l)), ls.bytes, ls.busy, ls.peak_flows});
  }
  if (r.oom.oom) {
    const std::string& dev = cluster.device(r.oom.device).name;
    r.oom_op = r.oom.op == UINT32_MAX ? std::string("static") : op_label(graph.op(r.oom.op));
    const std::string what =
        r.oom.op == UINT32_MAX ? std::string("static memory (weights, gradients, optimizer state)")
                               : fmt::format("op {}", op_label(graph.op(r.oom.op)));
    r.oom_message =
        fmt::format("{} needs {} but has {}: {} crossed the capacity by {} at {}", dev,
                    format_bytes(r.oom.bytes), format_bytes(r.oom.capacity), what,
                    format_bytes(r.oom.bytes - r.oom.capacity), format_time(r.oom.time));
  }
  const double it = r.iteration_time.seconds();
  if (info.model_flops > 0 && info.gpus > 0 && it > 0) {
    r.model_tflops_per_gpu = info.model_flops / info.gpus / it / 1e12;
    r.hardware_tflops_per_gpu = info.hardware_flops / info.gpus / it / 1e12;
    if (info.peak_flops_per_gpu > 0)
      r.mfu = *r.model_tflops_per_gpu * 1e12 / info.peak_flops_per_gpu;
  }
  if (info.tokens_per_sample > 0)
    r.tokens_per_s = r.throughput * static_cast<double>(info.tokens_per_sample);
  if (info.failures) r.goodput = goodput(*info.failures);
  return r;
}

std::string bound_line(const Report& r) {
  const double span = r.makespan.seconds();
  if (span <= 0) return "nothing to run";
  const DeviceReport* busiest = &r.devices.front();
  const DeviceReport *ar = busiest, *pp = busiest, *mem = busiest, *x = busiest;
  for (const DeviceReport& d : r.devices) {
    if (d.busy > busiest->busy) busiest = &d;
    if (d.exposed_all_to_all > x->exposed_all_to_all) x = &d;
    if (d.exposed_allreduce > ar->exposed_allreduce) ar = &d;
    if (d.exposed_pipeline_comm > pp->exposed_pipeline_comm) pp = &d;
    if (d.capacity > 0 && static_cast<double>(d.peak_memory) / static_cast<double>(d.capacity) >
                              static_cast<double>(mem->peak_memory) /
                                  static_cast<double>(std::max<int64_t>(1, mem->capacity)))
      mem = &d;
  }
  std::string out;
  if (r.oom.oom) return "out of memory: " + r.oom_message;
  const double busy = busiest->busy.seconds() / span;
  const double idle = span - busiest->busy.seconds() - busiest->exposed_allreduce.seconds() -
                      busiest->exposed_pipeline_comm.seconds() -
                      busiest->exposed_all_to_all.seconds();
  const double a = ar->exposed_allreduce.seconds(), c = pp->exposed_pipeline_comm.seconds();
  const double e = x->exposed_all_to_all.seconds();
  if (busy >= 0.75) {
    out = fmt::format("compute of stage {} on {} (busy {:.0f} % of the iteration)", busiest->stage,
                      busiest->name, 100 * busy);
  } else if (e >= a && e >= c && e >= idle) {
    out = fmt::format("exposed all-to-all exchanges ({} on {})", format_time(x->exposed_all_to_all),
                      x->name);
  } else if (a >= c && a >= idle) {
    // DeviceReport::exposed_allreduce: waits on gradient all-reduces and on the tensor
    // group's and ZeRO's collectives alike.
    out =
        fmt::format("exposed collectives ({} on {})", format_time(ar->exposed_allreduce), ar->name);
  } else if (c >= idle) {
    out = fmt::format("transfers between stages ({} waiting on {})",
                      format_time(pp->exposed_pipeline_comm), pp->name);
  } else {
    out = fmt::format("pipeline fill and drain (bubble {:.0f} %)", 100 * r.bubble_fraction);
  }
  // Waiting on the network: the link direction that was busiest.
  if (busy < 0.75 && !r.links.empty()) {
    const LinkReport* link = &r.links.front();
    for (const LinkReport& l : r.links) {
      if (l.busy > link->busy) link = &l;
    }
    if (link->busy.seconds() > 0.05 * span)
      out += fmt::format("; busiest link {} ({:.0f} % of the iteration)", link->name,
                         100 * link->busy.seconds() / span);
  }
  if (mem->capacity > 0 && mem->peak_memory * 10 > mem->capacity * 9)
    out += fmt::format(
        "; memory {:.0f} % of {} on {}",
        100.0 * static_cast<double>(mem->peak_memory) / static_cast<double>(mem->capacity),
        format_bytes(mem->capacity), mem->name);
  return out;
}

namespace {

using nlohmann::ordered_json;

// SPEC section 10: the share of wall time that makes progress, and what it costs.
void add_goodput(const Report& r, ordered_json& j) {
  const Goodput& g = *r.goodput;
  const FailureModel& f = *r.info.failures;
  j["goodput"] = g.goodput;
  j["goodput_samples_per_s"] = r.throughput * g.goodput;
  j["checkpoint_every_optimal"] = g.checkpoint_every_optimal_s;  // SPEC's name, in seconds
  j["checkpoint_every_optimal_s"] = g.checkpoint_every_optimal_s;
  j["failures"] = {{"cluster_mtbf_s", f.cluster_mtbf_s},
                   {"checkpoint_s", f.checkpoint_s},
                   {"restart_s", f.restart_s},
                   {"checkpoint_every_s", g.checkpoint_every_s},
                   {"checkpoint_every_optimal_s", g.checkpoint_every_optimal_s},
                   {"goodput_at_optimal", g.goodput_at_optimal},
                   {"failures_per_day", g.failures_per_day},
                   {"lost_hours_per_day", g.lost_hours_per_day},
                   {"checkpoint_hours_per_day", g.checkpoint_hours_per_day},
                   {"failure_hours_per_day", g.failure_hours_per_day}};
}

ordered_json oom_json(const Report& r) {
  ordered_json o;
  o["device"] = r.devices[static_cast<size_t>(r.oom.device)].name;
  o["op"] = r.oom_op;
  o["time_s"] = r.oom.time.seconds();
  o["bytes"] = r.oom.bytes;
  o["capacity_bytes"] = r.oom.capacity;
  o["over_by_bytes"] = r.oom.bytes - r.oom.capacity;
  o["message"] = r.oom_message;
  return o;
}

ordered_json device_json(const DeviceReport& d) {
  ordered_json dj;
  dj["name"] = d.name;
  dj["stage"] = d.stage >= 0 ? ordered_json(d.stage) : ordered_json(nullptr);
  dj["stages"] = d.stages;
  dj["busy_s"] = d.busy.seconds();
  dj["exposed_comm_s"] = {{"pipeline", d.exposed_pipeline_comm.seconds()},
                          {"allreduce", d.exposed_allreduce.seconds()}};
  // (All-to-alls, where a run has them: MoE dispatch and combine, Ulysses attention.)
  if (d.exposed_all_to_all > Time::zero())
    dj["exposed_comm_s"]["all_to_all"] = d.exposed_all_to_all.seconds();
  dj["exposed_comm_s"]["total"] =
      (d.exposed_pipeline_comm + d.exposed_allreduce + d.exposed_all_to_all).seconds();
  dj["peak_memory_bytes"] = d.peak_memory;
  dj["peak_time_s"] = d.peak_time.seconds();
  dj["capacity_bytes"] = d.capacity;
  ordered_json mem;
  for (int c = 0; c < kMemCategories; ++c)
    mem[to_string(static_cast<MemCategory>(c))] = d.at_peak[static_cast<size_t>(c)];
  dj["memory"] = mem;
  return dj;
}

}  // namespace

std::string to_json(const Report& r) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["scenario"] = r.info.scenario;
  j["schedule"] = r.info.schedule;
  j["layout"] = r.info.layout;
  const RunInfo::Parallelism& par = r.info.parallelism;
  j["parallelism"] = {{"tensor", par.tensor},
                      {"context", par.context},
                      {"expert", par.expert},
                      {"pipeline", par.pipeline},
                      {"data", par.data}};
  j["warnings"] = r.info.warnings;
  j["sequence_parallel"] = r.info.sequence_parallel;
  j["zero"] = r.info.zero;
  j["zero_applies"] = r.info.zero_applies;
  j["makespan_s"] = r.makespan.seconds();
  j["iteration_time_s"] = r.iteration_time.seconds();
  j["throughput_samples_per_s"] = r.throughput;
  j["bubble_fraction"] = r.bubble_fraction;
  auto maybe = [](const std::optional<double>& v) {
    return v ? ordered_json(*v) : ordered_json(nullptr);
  };
  j["bubble_megatron"] = maybe(r.info.megatron_bubble);
  j["model_tflops_per_gpu"] = maybe(r.model_tflops_per_gpu);
  j["hardware_tflops_per_gpu"] = maybe(r.hardware_tflops_per_gpu);
  j["mfu"] = maybe(r.mfu);
  j["tokens_per_s"] = maybe(r.tokens_per_s);
  if (r.goodput) add_goodput(r, j);
  j["why"] = bound_line(r);
  if (r.slowdown) {
    const double without = r.slowdown->iteration_time_without.seconds();
    const double cost = r.iteration_time.seconds() - without;
    j["slowdown"] = {{"applied", r.slowdown->applied},
                     {"iteration_time_without_s", without},
                     {"cost_s", cost},
                     {"cost_share", without > 0 ? cost / without : 0.0}};
  }
  j["oom"] = r.oom.oom;
  if (r.oom.oom) j["oom_detail"] = oom_json(r);
  j["iterations"] = r.info.iterations;
  j["samples_per_iteration"] = r.info.samples_per_iteration;
  ordered_json devices = ordered_json::array();
  for (const DeviceReport& d : r.devices) devices.push_back(device_json(d));
  j["devices"] = devices;
  ordered_json links = ordered_json::array();
  for (const LinkReport& l : r.links) {
    links.push_back(ordered_json{{"name", l.name},
                                 {"bytes", l.bytes},
                                 {"busy_s", l.busy.seconds()},
                                 {"peak_flows", l.peak_flows}});
  }
  j["links"] = links;
  j["events"] = r.events;
  j["version"] = PIPESIM_VERSION;
  ordered_json sets = ordered_json::object();
  for (const auto& [key, value] : r.info.overrides) sets[key] = value;
  j["overrides"] = sets;
  j["wall_s"] = r.info.wall_s;
  return json_text(j, 2) + "\n";
}

namespace {

std::string stage_list(const std::vector<int>& stages) {
  std::string out;
  for (int s : stages) out += fmt::format("{}{}", out.empty() ? "" : ",", s);
  return out;
}

// One line of the device table: `d`'s columns under `name`.
std::string device_line(const std::string& name, size_t width, const DeviceReport& d,
                        Time makespan) {
  const double pct = makespan > Time::zero() ? 100.0 * d.busy.seconds() / makespan.seconds() : 0.0;
  return fmt::format("{:<{}} {:>7} {:>12} {:>6.1f}% {:>12} {:>12} {:>12} {:>12} {:>12}\n", name,
                     width, stage_list(d.stages), format_time(d.busy), pct,
                     format_time(d.exposed_pipeline_comm), format_time(d.exposed_allreduce),
                     format_bytes(d.peak_memory),
                     format_bytes(d.at_peak[static_cast<size_t>(MemCategory::kActivations)]),
                     format_bytes(d.capacity));
}

// The devices that run stages: one line each, or when groups_gpus() one line per group of
// devices running the same stages (a stage's tensor ranks and data-parallel copies),
// naming its first and last device and how many, with each column's highest value over
// the group (its least capacity), so a 512-GPU run reads in a screen.
std::string device_table(const Report& r, bool per_device) {
  per_device = per_device || !groups_gpus(r, false);
  struct Group {
    std::vector<const DeviceReport*> members;
    DeviceReport worst;
  };
  std::vector<Group> groups;
  std::map<std::vector<int>, size_t> index;
  for (const DeviceReport& d : r.devices) {
    if (d.stages.empty()) continue;
    if (per_device) {
      groups.push_back({{&d}, d});
      continue;
    }
    const auto [it, fresh] = index.try_emplace(d.stages, groups.size());
    if (fresh) {
      groups.push_back({{&d}, d});
      continue;
    }
    Group& g = groups[it->second];
    g.members.push_back(&d);
    DeviceReport& w = g.worst;
    w.busy = std::max(w.busy, d.busy);
    w.exposed_pipeline_comm = std::max(w.exposed_pipeline_comm, d.exposed_pipeline_comm);
    w.exposed_allreduce = std::max(w.exposed_allreduce, d.exposed_allreduce);
    if (d.peak_memory > w.peak_memory) {
      w.peak_memory = d.peak_memory;
      w.at_peak = d.at_peak;
    }
    w.capacity = std::min(w.capacity, d.capacity);
  }
  std::vector<std::string> names;
  size_t width = 16;
  bool grouped = false;
  for (const Group& g : groups) {
    const size_t n = g.members.size();
    grouped = grouped || n > 1;
    names.push_back(
        n == 1 ? g.members.front()->name
               : fmt::format("{}..{} ({})", g.members.front()->name, g.members.back()->name, n));
    width = std::max(width, names.back().size());
  }
  std::string out = fmt::format("{:<{}} {:>7} {:>12} {:>7} {:>12} {:>12} {:>12} {:>12} {:>12}\n",
                                grouped ? "devices" : "device", width, "stage", "busy", "busy %",
                                "exposed p2p", "exposed AR", "peak mem", "activations", "capacity");
  for (size_t i = 0; i < groups.size(); ++i)
    out += device_line(names[i], width, groups[i].worst, r.makespan);
  if (grouped)
    out += "(one line per set of stages: its GPUs' highest figures; --per-device lists each GPU)\n";
  return out;
}

// "goodput     93.1 % (checkpoint every 30.0 min; ...)": the failures' cost in a line.
std::string goodput_line(const Goodput& g) {
  const auto minutes = [](double s) { return fmt::format("{:.1f} min", s / 60); };
  return fmt::format(
      "goodput     {:.1f} %  (checkpoint every {}; best every {}: {:.1f} %; {:.2f} failures "
      "and {:.2f} h lost per day)\n",
      100 * g.goodput, minutes(g.checkpoint_every_s), minutes(g.checkpoint_every_optimal_s),
      100 * g.goodput_at_optimal, g.failures_per_day, g.lost_hours_per_day);
}

}  // namespace

bool groups_gpus(const Report& r, bool per_device) {
  const auto staged = std::count_if(r.devices.begin(), r.devices.end(),
                                    [](const DeviceReport& d) { return !d.stages.empty(); });
  return !per_device && staged > kGroupGpusAbove;
}

std::string summary_table(const Report& r, bool per_device) {
  std::string out;
  out += fmt::format("scenario    {}\nschedule    {}\n", r.info.scenario, r.info.schedule);
  if (!r.info.overrides.empty()) {
    std::string sets;
    for (const auto& [key, value] : r.info.overrides)
      sets += fmt::format("{}{}={}", sets.empty() ? "" : ", ", key, value);
    out += fmt::format("overrides   {}\n", sets);
  }
  if (!r.info.layout.empty()) {
    out += fmt::format("layout      {} = {} GPU{}{}{}\n", r.info.layout, r.info.gpus,
                       r.info.gpus == 1 ? "" : "s",
                       r.info.sequence_parallel ? ", sequence parallel" : "",
                       r.info.zero == 0      ? ""
                       : r.info.zero_applies ? fmt::format(", ZeRO-{}", r.info.zero)
                                             : fmt::format(", ZeRO-{} (no effect: no "
                                                           "data-parallel ranks)",
                                                           r.info.zero));
  }
  out += fmt::format("makespan    {}  ({} iteration{})\n", format_time(r.makespan),
                     r.info.iterations, r.info.iterations == 1 ? "" : "s");
  out += fmt::format("iteration   {}\n", format_time(r.iteration_time));
  out += fmt::format("throughput  {:.1f} samples/s\n", r.throughput);
  out += fmt::format("bubble      {:.1f} %", r.bubble_fraction * 100);
  if (r.info.megatron_bubble) {
    out += fmt::format("  (Megatron's (S-1)/{} = {:.1f} %)",
                       r.info.virtual_stages > 1 ? "(vM)" : "M", *r.info.megatron_bubble * 100);
  }
  out += "\n";
  if (r.model_tflops_per_gpu) {
    out += fmt::format("per GPU     {:.1f} model TFLOP/s, {:.1f} hardware TFLOP/s{}\n",
                       *r.model_tflops_per_gpu, *r.hardware_tflops_per_gpu,
                       r.mfu ? fmt::format(", MFU {:.1f} %", *r.mfu * 100) : "");
  }
  if (r.tokens_per_s) out += fmt::format("tokens      {:.0f} tokens/s\n", *r.tokens_per_s);
  if (r.goodput) out += goodput_line(*r.goodput);
  out += fmt::format("bound by    {}\n", bound_line(r));
  if (r.slowdown) {
    const Time cost = r.iteration_time - r.slowdown->iteration_time_without;
    std::string what;
    for (const std::string& a : r.slowdown->applied) what += (what.empty() ? "" : ", ") + a;
    out += fmt::format(
        "slowdown    {}{} per iteration ({:+.1f} %) from {}\n", cost < Time::zero() ? "-" : "+",
        format_time(cost < Time::zero() ? Time::zero() - cost : cost),
        100 * cost.seconds() / std::max(1e-300, r.slowdown->iteration_time_without.seconds()),
        what);
  }
  out += fmt::format("oom         {}\n", r.oom.oom ? "YES: " + r.oom_message : "no");
  out += fmt::format("events      {}\n\n", r.events);
  out += device_table(r, per_device);
  // All-to-all waits (MoE dispatch and combine, Ulysses attention) are not in the columns.
  const auto a2a = std::max_element(r.devices.begin(), r.devices.end(),
                                    [](const DeviceReport& a, const DeviceReport& b) {
                                      return a.exposed_all_to_all < b.exposed_all_to_all;
                                    });
  if (a2a != r.devices.end() && a2a->exposed_all_to_all > Time::zero())
    out += fmt::format("exposed all-to-all (expert and context exchanges): at most {} on {}\n",
                       format_time(a2a->exposed_all_to_all), a2a->name);
  const auto idle = std::count_if(r.devices.begin(), r.devices.end(),
                                  [](const DeviceReport& d) { return d.stages.empty(); });
  if (idle > 0)
    out += fmt::format("({} GPU{} without a stage not shown)\n", idle, idle == 1 ? "" : "s");
  return out;
}

void write_memory_csv(std::ostream& out, const TaskGraph& graph, const Cluster& cluster,
                      const Timeline& tl) {
  out << "time_s,device,op";
  for (int c = 0; c < kMemCategories; ++c) out << ',' << to_string(static_cast<MemCategory>(c));
  out << ",total\n";
  std::vector<MemBreakdown> mem(static_cast<size_t>(cluster.num_devices()));
  auto row = [&](Time t, int d, const std::string& what) {
    const MemBreakdown& m = mem[static_cast<size_t>(d)];
    int64_t total = 0;
    out << fmt::format("{:.12g},{},{}", t.seconds(), cluster.device(d).name, what);
    for (int64_t v : m) {
      out << ',' << v;
      total += v;
    }
    out << ',' << total << '\n';
  };
  for (int d = 0; d < cluster.num_devices(); ++d) {
    mem[static_cast<size_t>(d)] = graph.static_memory(d);
    row(Time::zero(), d, "static");
  }
  for (const MemoryChange& c : tl.memory_changes) {
    const Op& op = graph.op(c.op);
    mem[static_cast<size_t>(op.device)][static_cast<size_t>(op.mem_category)] +=
        c.at_end ? op.mem_at_end : op.mem_at_start;
    row(c.time, op.device, op_label(op) + (c.at_end ? " end" : " start"));
  }
}

void write_csv(std::ostream& out, const TaskGraph& graph, const Cluster& cluster,
               const Timeline& tl) {
  out << "device,stream,op,micro_batch,start_s,end_s\n";
  for (OpId id = 0; id < graph.size(); ++id) {
    const Op& op = graph.op(id);
    const std::string stream = op.kind == OpKind::kTransfer
                                   ? fmt::format("send->{}", cluster.device(op.peer).name)
                                   : std::string("compute");
    out << fmt::format("{},{},{},{},{:.12g},{:.12g}\n", cluster.device(op.device).name, stream,
                       op_label(op), op.micro_batch, tl.start[id].seconds(), tl.end[id].seconds());
  }
}

}  // namespace pipesim
