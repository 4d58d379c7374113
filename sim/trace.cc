#include "sim/trace.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sim/report.h"

namespace pipesim {
namespace {

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump();
}

// Thread ids: 0 compute, 1 + peer for sends to peer, 1 + N + peer for receives from peer.
int send_tid(int peer) {
  return 1 + peer;
}
int recv_tid(int n, int peer) {
  return 1 + n + peer;
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
  std::vector<std::vector<bool>> send_used(static_cast<size_t>(n),
                                           std::vector<bool>(static_cast<size_t>(n), false));
  for (OpId id = 0; id < graph.size(); ++id) {
    const Op& op = graph.op(id);
    if (op.kind == OpKind::kTransfer)
      send_used[static_cast<size_t>(op.device)][static_cast<size_t>(op.peer)] = true;
  }
  for (int d = 0; d < n; ++d) {
    const std::string& name = cluster.device(d).name;
    emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":{}}}}})", d,
                     quoted(name)));
    emit(fmt::format(
        R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})", d, d));
    emit(fmt::format(
        R"({{"ph":"M","name":"thread_name","pid":{},"tid":0,"args":{{"name":"compute"}}}})", d));
    for (int p = 0; p < n; ++p) {
      if (!send_used[static_cast<size_t>(d)][static_cast<size_t>(p)]) continue;
      emit(fmt::format(
          R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", d,
          send_tid(p), quoted(fmt::format("send {}->{}", name, cluster.device(p).name))));
      emit(fmt::format(
          R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", p,
          recv_tid(n, d), quoted(fmt::format("recv {}->{}", name, cluster.device(p).name))));
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
        op.comm == CommKind::kAllReduce
            ? fmt::format("allreduce s{} it{}", op.stage, op.iteration)
            : fmt::format("{} s{} mb{}", to_string(op.comm), op.stage, op.micro_batch);
    emit(fmt::format(
        R"({{"ph":"X","cat":"transfer","name":"{}","pid":{},"tid":{},"ts":{:.6f},"dur":{:.6f},"args":{{"bytes":{}}}}})",
        name, op.device, send_tid(op.peer), ts, dur, op.bytes));
    emit(fmt::format(
        R"({{"ph":"X","cat":"transfer","name":"{}","pid":{},"tid":{},"ts":{:.6f},"dur":{:.6f},"args":{{"bytes":{}}}}})",
        name, op.peer, recv_tid(n, op.device), ts, dur, op.bytes));
    emit(fmt::format(
        R"({{"ph":"s","cat":"transfer","name":"{}","id":{},"pid":{},"tid":{},"ts":{:.6f}}})", name,
        id, op.device, send_tid(op.peer), ts));
    emit(fmt::format(
        R"({{"ph":"f","bp":"e","cat":"transfer","name":"{}","id":{},"pid":{},"tid":{},"ts":{:.6f}}})",
        name, id, op.peer, recv_tid(n, op.device), ts));
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
