// The host backend's links: transfers paced in real time by the simulator's own flow model.
//
// One thread drives a FlowNetwork (sim/network.h) in scaled wall-clock time: a transfer
// waits its route's latency, then shares every link direction it crosses max-min fairly
// with the other transfers there, exactly as the simulator models it, and ends when the
// model says its last byte is through. Meanwhile it copies real bytes (up to kCopyCap per
// transfer) between two buffers in chunks paced to its progress, so a link is real memory
// traffic, not a sleep.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "core/time.h"
#include "schedules/task_graph.h"
#include "sim/network.h"
#include "topology/cluster.h"

namespace pipesim {

// Scenario time <-> wall clock for one execution.
struct ScaledClock {
  std::chrono::steady_clock::time_point origin;
  double scale = 1.0;  // wall seconds per scenario second

  Time now() const {
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
    return Time::ps(static_cast<int64_t>(wall / scale * 1e12));
  }
  std::chrono::steady_clock::time_point wall(Time t) const {
    return origin + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(t.seconds() * scale));
  }
};

class LinkEmulator {
 public:
  static constexpr int64_t kCopyCap = 1 << 20;
  // `clock` must outlive the emulator. `done(op, start, end)` is called on the emulator's thread
  // when a transfer ends.
  using Done = std::function<void(OpId, Time, Time)>;
  LinkEmulator(const TaskGraph& g, const Cluster& c, const ScaledClock& clock, Done done);

  // A transfer whose deps ended at `ready` (any thread). Its modelled start is `ready`,
  // however late the emulator's thread wakes to it.
  void submit(OpId id, Time ready);
  // The emulator's thread: returns once every transfer of the graph has ended.
  void run();

 private:
  struct Event {
    Time time;
    uint64_t seq;
    OpId op;
    bool latency;  // latency elapsed (else: projected end of the flow)
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct Copy {
    OpId op;
    int64_t total = 0, copied = 0;
    Time model_start, finish;  // flow phase in model time, latest projection
  };
  void start(OpId id, Time ready);
  void start_flow(OpId id, Time t);
  void end_flow(OpId id, Time t);
  // Re-rates the start or end just made and pushes the projections that moved.
  void project(Time t);
  void pace(Time now);
  void due(Time t);

  const TaskGraph& graph_;
  const Cluster& cluster_;
  const ScaledClock& clock_;  // the caller's: its origin is set when the run starts
  Done done_;
  FlowNetwork network_;
  std::vector<FlowNetwork::Update> changed_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<OpId, Time>> incoming_;  // guarded by mu_
  // The emulator thread's own state.
  std::vector<Event> events_;  // min-heap
  uint64_t seq_ = 0;
  Time model_now_;  // the flow model's time: never goes backwards
  std::vector<Time> started_;
  std::vector<Copy> copies_;
  std::vector<char> src_, dst_;
  size_t remaining_ = 0;
};

}  // namespace pipesim
