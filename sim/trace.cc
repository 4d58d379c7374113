#include "sim/trace.h"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sim/report.h"

namespace pipesim {
// A time in microseconds with six decimals, formatted from its integer picoseconds: the
// digits "{:.6f}" prints for t.microseconds() (exactly so below 4,500 s, where the double
// still resolves 1e-6 us), without going through floating point.
struct Micros {
  Time t;
};
}  // namespace pipesim
template <>
struct fmt::formatter<pipesim::Micros> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <class Context>
  auto format(pipesim::Micros m, Context& ctx) const {
    const int64_t ps = m.t.ps_count();
    const int64_t whole = ps / 1'000'000, frac = ps % 1'000'000;
    return fmt::format_to(ctx.out(), FMT_COMPILE("{}{}.{:06}"), ps < 0 ? "-" : "",
                          whole < 0 ? -whole : whole, frac < 0 ? -frac : frac);
  }
};

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
// pair needs. Only pairs that exchange something are held (a map, not an N x N table).
struct Lanes {
  std::vector<int> of_op;                     // lane of each transfer op
  int64_t width = 1;                          // L
  std::map<std::pair<int, int>, int> count;   // (sender, receiver) -> lanes used
};

Lanes assign_lanes(const TaskGraph& graph, const Timeline& tl) {
  Lanes lanes;
  lanes.of_op.assign(static_cast<size_t>(graph.size()), 0);
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
    int& used = lanes.count[{op.device, op.peer}];
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

// Events formatted straight into one buffer, handed to the stream a megabyte at a time.
class Writer {
 public:
  explicit Writer(std::ostream& out) : out_(out) {}
  ~Writer() { flush(); }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Starts the next event (after a separator unless it is the first) and returns where to
  // format it.
  std::back_insert_iterator<fmt::memory_buffer> next() {
    if (buf_.size() >= (size_t{1} << 20)) flush();
    if (!first_) buf_.append(std::string_view(",\n"));
    first_ = false;
    return std::back_inserter(buf_);
  }
  void raw(std::string_view s) { buf_.append(s); }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

 private:
  std::ostream& out_;
  fmt::memory_buffer buf_;
  bool first_ = true;
};

}  // namespace

void write_trace(std::ostream& out, const TaskGraph& graph, const Cluster& cluster,
                 const Timeline& tl) {
  const int n = cluster.num_devices();
  Writer w(out);
  w.raw("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
  // Names for the processes and the threads that carry events.
  const Lanes lanes = assign_lanes(graph, tl);
  auto pair = lanes.count.begin();
  for (int d = 0; d < n; ++d) {
    const std::string& name = cluster.device(d).name;
    fmt::format_to(w.next(), R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":{}}}}})",
                   d, quoted(name));
    fmt::format_to(
        w.next(),
        R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})", d, d);
    fmt::format_to(
        w.next(),
        R"({{"ph":"M","name":"thread_name","pid":{},"tid":0,"args":{{"name":"compute"}}}})", d);
    for (; pair != lanes.count.end() && pair->first.first == d; ++pair) {
      const int p = pair->first.second;
      for (int lane = 0; lane < pair->second; ++lane) {
        const std::string names =
            fmt::format("{}->{}{}", name, cluster.device(p).name, lane_suffix(lane));
        fmt::format_to(
            w.next(),
            R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", d,
            send_tid(lanes, p, lane), quoted("send " + names));
        fmt::format_to(
            w.next(),
            R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", p,
            recv_tid(lanes, n, d, lane), quoted("recv " + names));
      }
    }
  }
  fmt::memory_buffer label;
  for (OpId id = 0; id < graph.size(); ++id) {
    const Op& op = graph.op(id);
    const Micros ts{tl.start[id]}, dur{tl.end[id] - tl.start[id]};
    label.clear();
    if (op.kind != OpKind::kTransfer) {
      append_op_label(label, op);
      fmt::format_to(
          w.next(),
          FMT_COMPILE(
              R"({{"ph":"X","cat":"compute","name":"{}","pid":{},"tid":0,"ts":{},"dur":{},"args":{{"stage":{},"micro_batch":{},"iteration":{}}}}})"),
          std::string_view(label.data(), label.size()), op.device, ts, dur, op.stage,
          op.micro_batch, op.iteration);
      continue;
    }
    if (is_collective(op.comm)) {
      fmt::format_to(std::back_inserter(label), FMT_COMPILE("{} s{} it{}"),
                     std::string_view(to_string(op.comm)), op.stage, op.iteration);
    } else {
      fmt::format_to(std::back_inserter(label), FMT_COMPILE("{} s{} mb{}"),
                     std::string_view(to_string(op.comm)), op.stage, op.micro_batch);
    }
    const std::string_view name(label.data(), label.size());
    const int lane = lanes.of_op[static_cast<size_t>(id)];
    const int64_t stid = send_tid(lanes, op.peer, lane), rtid = recv_tid(lanes, n, op.device, lane);
    for (const auto& [pid, tid] : {std::pair{op.device, stid}, std::pair{op.peer, rtid}}) {
      fmt::format_to(
          w.next(),
          FMT_COMPILE(
              R"({{"ph":"X","cat":"transfer","name":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"bytes":{}}}}})"),
          name, pid, tid, ts, dur, op.bytes);
    }
    fmt::format_to(
        w.next(),
        FMT_COMPILE(
            R"({{"ph":"s","cat":"transfer","name":"{}","id":{},"pid":{},"tid":{},"ts":{}}})"),
        name, id, op.device, stid, ts);
    fmt::format_to(
        w.next(),
        FMT_COMPILE(
            R"({{"ph":"f","bp":"e","cat":"transfer","name":"{}","id":{},"pid":{},"tid":{},"ts":{}}})"),
        name, id, op.peer, rtid, ts);
  }
  // Memory counters: replay the recorded changes from the static level.
  std::vector<MemBreakdown> mem(static_cast<size_t>(n));
  auto counter = [&](int d, Time t) {
    auto it = w.next();
    it = fmt::format_to(it, FMT_COMPILE(R"j({{"ph":"C","name":"memory (bytes)","pid":{},"ts":{},"args":{{)j"),
                        d, Micros{t});
    for (int c = 0; c < kMemCategories; ++c) {
      it = fmt::format_to(it, FMT_COMPILE("{}\"{}\":{}"), c == 0 ? "" : ",",
                          to_string(static_cast<MemCategory>(c)),
                          mem[static_cast<size_t>(d)][static_cast<size_t>(c)]);
    }
    w.raw("}}");
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
    fmt::format_to(w.next(),
                   R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"network"}}}})", n);
    fmt::format_to(
        w.next(),
        R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})", n, n);
  }
  std::vector<std::string> util_names(static_cast<size_t>(cluster.num_links()) * 2);
  for (const LinkSample& s : tl.link_samples) {
    std::string& util = util_names[static_cast<size_t>(s.link)];
    if (util.empty()) util = quoted("util " + cluster.direction_name(s.link));
    fmt::format_to(
        w.next(),
        FMT_COMPILE(R"({{"ph":"C","name":{},"pid":{},"ts":{},"args":{{"utilisation":{:.4f}}}}})"),
        util, n, Micros{s.time}, s.utilisation);
  }
  w.raw("\n]}\n");
}

}  // namespace pipesim

