#include "backend/host_backend.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "backend/arena.h"
#include "backend/host_links.h"

namespace pipesim {
namespace {

constexpr int kTile = 32;  // C[32x32] += A[32x32] x B[32x32]: 2 x 32^3 FLOPs

// One thread's GEMM operands, blocked so a tile stays in L1.
struct TileKernel {
  std::vector<float> a, b, c;
  TileKernel() : a(kTile * kTile), b(kTile * kTile), c(kTile * kTile, 0.0f) {
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(i % 7) * 0.01f;
      b[i] = static_cast<float>(i % 5) * 0.01f;
    }
  }
  void run(int64_t tiles) {
    for (int64_t t = 0; t < tiles; ++t) {
      for (int i = 0; i < kTile; ++i) {
        for (int k = 0; k < kTile; ++k) {
          const float aik = a[static_cast<size_t>(i * kTile + k)];
          for (int j = 0; j < kTile; ++j)
            c[static_cast<size_t>(i * kTile + j)] += aik * b[static_cast<size_t>(k * kTile + j)];
        }
      }
      // Keep the values bounded (and the work observable) across many tiles.
      c[static_cast<size_t>(t % (kTile * kTile))] *= 0.5f;
    }
  }
  float checksum() const { return c[0] + c[static_cast<size_t>(kTile * kTile - 1)]; }
};

// Keeps the compiler from dropping the kernels' results.
std::atomic<float> g_sink{0.0f};

// Tiles per second on one thread: the best of 20 short trials, so a trial that shared its
// core with other work does not count (ops that share theirs then take longer, measured).
double calibrate() {
  TileKernel k;
  k.run(64);  // warm the caches
  double best = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const auto t0 = std::chrono::steady_clock::now();
    k.run(32);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, 32 / s);
  }
  g_sink.store(k.checksum(), std::memory_order_relaxed);
  return best;
}

// Device threads run at a lower priority than the link thread (raising one's niceness needs
// no privilege), so that link events and wake-ups are not queued behind compute.
void lower_priority() {
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  const int now = getpriority(PRIO_PROCESS, tid);
  setpriority(PRIO_PROCESS, tid, std::min(now + 5, 19));
}

}  // namespace

double auto_time_scale(const TaskGraph& g, Time makespan, double op_wall_s,
                       double makespan_wall_s) {
  std::vector<double> ops;
  for (const Op& op : g.ops()) {
    if (is_compute(op.kind) && op.duration > Time::zero()) ops.push_back(op.duration.seconds());
  }
  if (ops.empty() || makespan == Time::zero()) return 1.0;
  std::nth_element(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(ops.size() / 2),
                   ops.end());
  const double median_op = ops[ops.size() / 2];
  return std::min(op_wall_s / median_op, makespan_wall_s / makespan.seconds());
}

double HostExecutor::tile_flops() {
  return 2.0 * kTile * kTile * kTile;
}

HostExecutor::HostExecutor(const Cluster& cluster, HostOptions options)
    : cluster_(cluster), options_(options), tile_rate_(calibrate()) {}

std::string HostExecutor::description() const {
  return fmt::format(
      "host: {} hardware threads, {:.2f} GFLOP/s fp32 per thread, time scale {:.4g} (not "
      "timing-faithful)",
      std::thread::hardware_concurrency(), tile_rate_ * tile_flops() / 1e9, options_.time_scale);
}

int64_t HostExecutor::tiles_for(Time duration) const {
  return std::llround(duration.seconds() * options_.time_scale * tile_rate_);
}

Time HostExecutor::time_op(const Op& op, const ExecWork&) {
  TileKernel k;
  const auto t0 = std::chrono::steady_clock::now();
  k.run(tiles_for(op.duration));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g_sink.store(k.checksum(), std::memory_order_relaxed);
  return time_from_seconds(wall / options_.time_scale);
}

namespace {

// One run's state shared by the device threads and the link emulator: each op's deps not
// yet ended, a wake-up per device, the clock and the start signal.
struct HostRun {
  HostRun(const TaskGraph& graph, double time_scale)
      : g(graph),
        waiting(graph.size()),
        wake(static_cast<size_t>(graph.num_devices())),
        clock{std::chrono::steady_clock::now(), time_scale} {
    for (OpId id = 0; id < g.size(); ++id)
      waiting[id].store(static_cast<uint32_t>(g.deps(id).size()), std::memory_order_relaxed);
    m.start.assign(g.size(), Time::zero());
    m.end.assign(g.size(), Time::zero());
    m.peak_memory.assign(static_cast<size_t>(g.num_devices()), 0);
  }

  // An op has ended: release its successors (any thread).
  void complete(OpId id, Time at) {
    for (OpId s : g.successors(id)) {
      if (waiting[s].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
      const Op& next = g.op(s);
      if (next.kind == OpKind::kTransfer) {
        links->submit(s, at);
      } else {
        Wake& w = wake[static_cast<size_t>(next.device)];
        { const std::lock_guard lk(w.mu); }
        w.cv.notify_one();
      }
    }
  }

  void wait_for_start() {
    std::unique_lock lk(go_mu);
    go_cv.wait(lk, [&] { return go; });
  }

  // Starts the clock once every thread is made.
  void start() {
    {
      const std::lock_guard lk(go_mu);
      clock.origin = std::chrono::steady_clock::now();
      go = true;
    }
    go_cv.notify_all();
  }

  // Blocks device d's thread until op `id`'s deps have ended.
  void wait_ready(int d, OpId id) {
    Wake& w = wake[static_cast<size_t>(d)];
    std::unique_lock lk(w.mu);
    w.cv.wait(lk, [&] { return waiting[id].load(std::memory_order_acquire) == 0; });
  }

  struct Wake {
    std::mutex mu;
    std::condition_variable cv;
  };
  const TaskGraph& g;
  Measurement m;
  std::vector<std::atomic<uint32_t>> waiting;
  std::vector<Wake> wake;
  ScaledClock clock;
  std::unique_ptr<LinkEmulator> links;
  std::mutex go_mu;
  std::condition_variable go_cv;
  bool go = false;
};

}  // namespace

Measurement HostExecutor::run(const TaskGraph& g, const std::vector<ExecWork>&) {
  HostRun r(g, options_.time_scale);
  Measurement& m = r.m;
  r.links = std::make_unique<LinkEmulator>(g, cluster_, r.clock, [&](OpId id, Time s, Time e) {
    m.start[id] = s;
    m.end[id] = e;
    r.complete(id, e);
  });
  auto device_thread = [&](int d) {
    lower_priority();
    r.wait_for_start();
    Arena arena(g.static_memory(d));
    TileKernel kernel;
    for (OpId id : g.stream(d)) {
      r.wait_ready(d, id);
      const Op& op = g.op(id);
      m.start[id] = r.clock.now();
      arena.apply(op.mem_at_start);
      kernel.run(tiles_for(op.duration));
      arena.apply(op.mem_at_end);
      m.end[id] = r.clock.now();
      r.complete(id, m.end[id]);
    }
    m.peak_memory[static_cast<size_t>(d)] = arena.peak();
    g_sink.store(kernel.checksum(), std::memory_order_relaxed);
  };

  std::vector<std::thread> threads;
  for (int d = 0; d < g.num_devices(); ++d) {
    if (g.stream(d).empty()) {
      m.peak_memory[static_cast<size_t>(d)] = Arena(g.static_memory(d)).peak();
      continue;
    }
    threads.emplace_back(device_thread, d);
  }
  r.start();
  for (OpId id = 0; id < g.size(); ++id) {
    if (g.op(id).kind == OpKind::kTransfer && g.deps(id).empty()) r.links->submit(id, Time::zero());
  }
  r.links->run();
  for (std::thread& t : threads) t.join();
  for (OpId id = 0; id < g.size(); ++id) m.makespan = max(m.makespan, m.end[id]);
  return std::move(m);
}

}  // namespace pipesim
