#include "sim/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sim/report.h"

namespace pipesim {
namespace {

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump();
}

// Perfetto drops a slice that overlaps another on its track without nesting in it, so the
// transfers between one pair of devices go on lanes, each a thread of its own: a transfer
// takes the first lane free at its start (interval partitioning, the fewest lanes). The
// receiver shows the same lanes. Thread ids: 0 compute; 1 + peer x L + lane for sends to
// peer; 1 + (N + peer) x L + lane for receives from peer, where L is the most lanes any
// pair needs.
struct Lanes {
  std::vector<int> of_op;               // lane of each transfer op
  int64_t width = 1;                    // L
  std::vector<std::vector<int>> count;  // [sender][receiver] -> lanes used
};

Lanes assign_lanes(const TaskGraph& graph, const Timeline& tl, int n) {
  Lanes lanes;
  lanes.of_op.assign(static_cast<size_t>(graph.size()), 0);
  lanes.count.assign(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n), 0));
  std::vector<OpId> transfers;
  for (OpId id = 0; id < graph.size(); ++id)
    if (graph.op(id).kind == OpKind::kTransfer) transfers.push_back(id);
  std::stable_sort(transfers.begin(), transfers.end(),
                   [&](OpId a, OpId b) { return tl.start[a] < tl.start[b]; });
  std::map<std::pair<int, int>, std::vector<Time>> busy_until;  // per pair, per lane
  for (OpId id : transfers) {
    const Op& op = graph.op(id);
    auto& lane_ends = busy_until[{op.device, op.peer}];
    size_t lane = 0;
    while (lane < lane_ends.size() && lane_ends[lane] > tl.start[id]) ++lane;
    if (lane == lane_ends.size()) lane_ends.push_back(Time::zero());
    lane_ends[lane] = tl.end[id];
    lanes.of_op[static_cast<size_t>(id)] = static_cast<int>(lane);
    int& used = lanes.count[static_cast<size_t>(op.device)][static_cast<size_t>(op.peer)];
    used = std::max(used, static_cast<int>(lane) + 1);
    lanes.width = std::max<int64_t>(lanes.width, used);
  }
  return lanes;
}

int64_t send_tid(const Lanes& l, int peer, int lane) {
  return 1 + peer * l.width + lane;
}
int64_t recv_tid(const Lanes& l, int n, int peer, int lane) {
  return 1 + (n + peer) * l.width + lane;
}

std::string lane_suffix(int lane) {
  return lane == 0 ? "" : fmt::format(" #{}", lane + 1);
}

}  // namespace

void write_trace(std::ostream& out, const TaskGraph& graph, const Cluster& cluster,
                 const Timeline& tl) {
  const int n = cluster.num_devices();
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& e) {
    if (!first) out << ",\n";
    first = false;
    out << e;
  };
  // Names for the processes and the threads that carry events.
  const Lanes lanes = assign_lanes(graph, tl, n);
  for (int d = 0; d < n; ++d) {
    const std::string& name = cluster.device(d).name;
    emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":{}}}}})", d,
                     quoted(name)));
    emit(fmt::format(
        R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})", d, d));
    emit(fmt::format(
        R"({{"ph":"M","name":"thread_name","pid":{},"tid":0,"args":{{"name":"compute"}}}})", d));
    for (int p = 0; p < n; ++p) {
      for (int lane = 0; lane < lanes.count[static_cast<size_t>(d)][static_cast<size_t>(p)];
           ++lane) {
        const std::string pair =
            fmt::format("{}->{}{}", name, cluster.device(p).name, lane_suffix(lane));
        emit(fmt::format(
            R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", d,
            send_tid(lanes, p, lane), quoted("send " + pair)));
        emit(fmt::format(
            R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", p,
            recv_tid(lanes, n, d, lane), quoted("recv " + pair)));
      }
    }
  }
  for (OpId id = 0; id < graph.size(); ++id) {
    const Op& op = graph.op(id);
    const double ts = tl.start[id].microseconds();
    const double dur = (tl.end[id] - tl.start[id]).microseconds();
    if (op.kind != OpKind::kTransfer) {
      emit(fmt::format(
          R"({{"ph":"X","cat":"compute","name":"{}","pid":{},"tid":0,"ts":{:.6f},"dur":{:.6f},"args":{{"stage":{},"micro_batch":{},"iteration":{}}}}})",
          op_label(op), op.device, ts, dur, op.stage, op.micro_batch, op.iteration));
      continue;
    }
    const std::string name =
        is_collective(op.comm)
            ? fmt::format("{} s{} it{}", to_string(op.comm), op.stage, op.iteration)
            : fmt::format("{} s{} mb{}", to_string(op.comm), op.stage, op.micro_batch);
    const int lane = lanes.of_op[static_cast<size_t>(id)];
    const int64_t stid = send_tid(lanes, op.peer, lane), rtid = recv_tid(lanes, n, op.device, lane);
    emit(fmt::format(
        R"({{"ph":"X","cat":"transfer","name":"{}","pid":{},"tid":{},"ts":{:.6f},"dur":{:.6f},"args":{{"bytes":{}}}}})",
        name, op.device, stid, ts, dur, op.bytes));
    emit(fmt::format(
        R"({{"ph":"X","cat":"transfer","name":"{}","pid":{},"tid":{},"ts":{:.6f},"dur":{:.6f},"args":{{"bytes":{}}}}})",
        name, op.peer, rtid, ts, dur, op.bytes));
    emit(fmt::format(
        R"({{"ph":"s","cat":"transfer","name":"{}","id":{},"pid":{},"tid":{},"ts":{:.6f}}})", name,
        id, op.device, stid, ts));
    emit(fmt::format(
        R"({{"ph":"f","bp":"e","cat":"transfer","name":"{}","id":{},"pid":{},"tid":{},"ts":{:.6f}}})",
        name, id, op.peer, rtid, ts));
  }
  // Memory counters: replay the recorded changes from the static level.
  std::vector<MemBreakdown> mem(static_cast<size_t>(n));
  auto counter = [&](int d, Time t) {
    std::string args;
    for (int c = 0; c < kMemCategories; ++c) {
      args += fmt::format("{}\"{}\":{}", c == 0 ? "" : ",", to_string(static_cast<MemCategory>(c)),
                          mem[static_cast<size_t>(d)][static_cast<size_t>(c)]);
    }
    emit(fmt::format(R"j({{"ph":"C","name":"memory (bytes)","pid":{},"ts":{:.6f},"args":{{{}}}}})j",
                     d, t.microseconds(), args));
  };
  for (int d = 0; d < n; ++d) {
    mem[static_cast<size_t>(d)] = graph.static_memory(d);
    if (!graph.stream(d).empty()) counter(d, Time::zero());
  }
  for (const MemoryChange& c : tl.memory_changes) {
    const Op& op = graph.op(c.op);
    mem[static_cast<size_t>(op.device)][static_cast<size_t>(op.mem_category)] +=
        c.at_end ? op.mem_at_end : op.mem_at_start;
    counter(op.device, c.time);
  }
  // Link utilisation: one counter per link direction, in a "network" process after the GPUs.
  if (!tl.link_samples.empty()) {
    emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"network"}}}})",
                     n));
    emit(fmt::format(
        R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})", n, n));
  }
  for (const LinkSample& s : tl.link_samples) {
    emit(fmt::format(
        R"({{"ph":"C","name":{},"pid":{},"ts":{:.6f},"args":{{"utilisation":{:.4f}}}}})",
        quoted("util " + cluster.direction_name(s.link)), n, s.time.microseconds(), s.utilisation));
  }
  out << "\n]}\n";
}

}  // namespace pipesim
