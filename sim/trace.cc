#include "sim/trace.h"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "sim/report.h"

namespace pipesim {
namespace {

// A time in microseconds with six decimals, written from its integer picoseconds (put
// below): the digits "{:.6f}" prints for t.microseconds() (exactly so below 4,500 s, where
// the double still resolves 1e-6 us), without going through floating point.
struct Micros {
  Time t;
};

std::string quoted(const std::string& s) {
  return json_text(nlohmann::json(s));
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

// Events formatted straight into one buffer through raw pointers (fmt's compiled formats
// write to a char* without checks), handed to the stream a megabyte at a time. next(extra)
// makes room for one event of at most kEvent bytes plus `extra` (the lengths of the names
// it holds) and returns where to format it; done(end) takes what was written.
class Writer {
 public:
  static constexpr size_t kEvent = 512;  // an event's bytes besides its names
  explicit Writer(std::ostream& out) : out_(out), buf_(kFlush + kEvent) {}
  ~Writer() { flush(); }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  char* next(size_t extra = 0) {
    if (size_ >= kFlush) flush();
    if (buf_.size() < size_ + 2 + kEvent + extra) buf_.resize(size_ + 2 + kEvent + extra);
    char* p = buf_.data() + size_;
    if (!first_) {
      *p++ = ',';
      *p++ = '\n';
    }
    first_ = false;
    return p;
  }
  void done(char* end) {
    size_ = static_cast<size_t>(end - buf_.data());
    PIPESIM_ASSERT(size_ <= buf_.size(), "a trace event fits the room made for it");
  }
  void raw(std::string_view s) {
    if (buf_.size() < size_ + s.size()) buf_.resize(size_ + s.size());
    std::copy(s.begin(), s.end(), buf_.data() + size_);
    size_ += s.size();
  }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(size_));
    size_ = 0;
  }

 private:
  static constexpr size_t kFlush = size_t{1} << 20;
  std::ostream& out_;
  std::vector<char> buf_;
  size_t size_ = 0;
  bool first_ = true;
};

// The hot events' pieces, written by hand: a literal (its length known at compile time, so
// the copy is a few moves), a string, an integer, a Micros (as fmt's "{}{}.{:06}" of the
// sign, whole microseconds and picoseconds left).
template <size_t N>
char* put(char* p, const char (&s)[N]) {
  std::memcpy(p, s, N - 1);
  return p + N - 1;
}
char* put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
int count_digits(uint64_t v) {
  int n = 1;
  for (; v >= 10000; v /= 10000) n += 4;
  return n + (v >= 10) + (v >= 100) + (v >= 1000);
}
// `v`'s decimal digits, or its last `width` digits zero-padded where width > 0; two
// digits at a time from the back, straight where they go. (fmt::format_int then a copy
// of its digits made the 634 MiB trace of bench/trace_bench 18 % slower: 1.75-1.90 s
// against 1.46-1.61 s, side by side.)
char* put_digits(char* p, uint64_t v, int width = 0) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  const int n = width > 0 ? width : count_digits(v);
  char* q = p + n;
  for (int left = n; left >= 2; left -= 2) {
    q -= 2;
    std::memcpy(q, kPairs + 2 * (v % 100), 2);
    v /= 100;
  }
  if (q > p) *--q = static_cast<char>('0' + v % 10);
  return p + n;
}
char* put(char* p, int64_t v) {
  if (v < 0) *p++ = '-';
  return put_digits(p, v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
}
char* put(char* p, Micros m) {
  const int64_t ps = m.t.ps_count();
  if (ps < 0) *p++ = '-';
  const uint64_t u = ps < 0 ? 0 - static_cast<uint64_t>(ps) : static_cast<uint64_t>(ps);
  p = put_digits(p, u / 1'000'000);
  *p++ = '.';
  return put_digits(p, u % 1'000'000, 6);
}
// "{:.4f}" of a float: the float times 10^4 is exact in a double, and rounding it to the
// nearest integer, ties to even, is what fmt prints (fmt's correctly rounded digits).
// Negative, huge and not-a-number values go through fmt.
char* put_fixed4(char* p, float x) {
  const double v = static_cast<double>(x) * 10000.0;
  if (std::signbit(x) || !(v < 1e15)) return fmt::format_to(p, FMT_COMPILE("{:.4f}"), x);
  const auto k = static_cast<uint64_t>(std::nearbyint(v));
  p = put_digits(p, k / 10000);
  *p++ = '.';
  return put_digits(p, k % 10000, 4);
}

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
    const std::string q = quoted(name);
    w.done(fmt::format_to(
        w.next(q.size()),
        R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":{}}}}})", d, q));
    w.done(fmt::format_to(
        w.next(),
        R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})", d, d));
    w.done(fmt::format_to(
        w.next(),
        R"({{"ph":"M","name":"thread_name","pid":{},"tid":0,"args":{{"name":"compute"}}}})", d));
    for (; pair != lanes.count.end() && pair->first.first == d; ++pair) {
      const int p = pair->first.second;
      for (int lane = 0; lane < pair->second; ++lane) {
        const std::string names =
            fmt::format("{}->{}{}", name, cluster.device(p).name, lane_suffix(lane));
        const std::string send = quoted("send " + names), recv = quoted("recv " + names);
        w.done(fmt::format_to(
            w.next(send.size()),
            R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", d,
            send_tid(lanes, p, lane), send));
        w.done(fmt::format_to(
            w.next(recv.size()),
            R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", p,
            recv_tid(lanes, n, d, lane), recv));
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
      const std::string_view name(label.data(), label.size());
      char* it = put(w.next(name.size()), R"({"ph":"X","cat":"compute","name":")");
      it = put(put(put(it, name), R"(","pid":)"), int64_t{op.device});
      it = put(put(put(it, R"(,"tid":0,"ts":)"), ts), R"(,"dur":)");
      it = put(put(put(it, dur), R"(,"args":{"stage":)"), int64_t{op.stage});
      it = put(put(put(it, R"(,"micro_batch":)"), int64_t{op.micro_batch}), R"(,"iteration":)");
      w.done(put(put(it, int64_t{op.iteration}), "}}"));
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
      char* it = put(put(w.next(name.size()), R"({"ph":"X","cat":"transfer","name":")"), name);
      it = put(put(put(put(it, R"(","pid":)"), int64_t{pid}), R"(,"tid":)"), tid);
      it = put(put(put(put(it, R"(,"ts":)"), ts), R"(,"dur":)"), dur);
      w.done(put(put(put(it, R"(,"args":{"bytes":)"), op.bytes), "}}"));
    }
    char* it = put(put(w.next(name.size()), R"({"ph":"s","cat":"transfer","name":")"), name);
    it = put(put(put(put(it, R"(","id":)"), int64_t{id}), R"(,"pid":)"), int64_t{op.device});
    it = put(put(put(put(it, R"(,"tid":)"), stid), R"(,"ts":)"), ts);
    w.done(put(it, "}"));
    it = put(put(w.next(name.size()), R"({"ph":"f","bp":"e","cat":"transfer","name":")"), name);
    it = put(put(put(put(it, R"(","id":)"), int64_t{id}), R"(,"pid":)"), int64_t{op.peer});
    it = put(put(put(put(it, R"(,"tid":)"), rtid), R"(,"ts":)"), ts);
    w.done(put(it, "}"));
  }
  // Memory counters: replay the recorded changes from the static level.
  std::vector<MemBreakdown> mem(static_cast<size_t>(n));
  auto counter = [&](int d, Time t) {
    char* it = put(w.next(), R"j({"ph":"C","name":"memory (bytes)","pid":)j");
    it = put(put(put(put(it, int64_t{d}), R"(,"ts":)"), Micros{t}), R"(,"args":{)");
    for (int c = 0; c < kMemCategories; ++c) {
      if (c != 0) *it++ = ',';
      *it++ = '"';
      it = put(put(it, to_string(static_cast<MemCategory>(c))), "\":");
      it = put(it, mem[static_cast<size_t>(d)][static_cast<size_t>(c)]);
    }
    w.done(put(it, "}}"));
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
    w.done(fmt::format_to(
        w.next(), R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"network"}}}})",
        n));
    w.done(fmt::format_to(
        w.next(),
        R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})", n, n));
  }
  std::vector<std::string> util_names(static_cast<size_t>(cluster.num_links()) * 2);
  for (const LinkSample& s : tl.link_samples) {
    std::string& util = util_names[static_cast<size_t>(s.link)];
    if (util.empty()) util = quoted("util " + cluster.direction_name(s.link));
    // A float's "{:.4f}" has at most 45 characters.
    char* it = put(put(w.next(util.size() + 64), R"({"ph":"C","name":)"), util);
    it = put(put(put(put(it, R"(,"pid":)"), int64_t{n}), R"(,"ts":)"), Micros{s.time});
    w.done(put(put_fixed4(put(it, R"(,"args":{"utilisation":)"), s.utilisation), "}}"));
  }
  w.raw("\n]}\n");
}

}  // namespace pipesim
