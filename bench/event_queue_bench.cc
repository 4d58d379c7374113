// Event queue throughput. Target: >= 10 M events/s on a 2-core
// CI machine, measured as one pop + one push ("hold" model, as ns-3's bench-scheduler)
// with a queue of N pending events.
#include <benchmark/benchmark.h>

#include <random>

#include "sim/event_queue.h"

namespace pipesim {
namespace {

// One pop and one push per iteration, `state.range(0)` events pending, each pushed event
// delayed by the next of `delays` (4096 values).
void hold(benchmark::State& state, const std::vector<int64_t>& delays) {
  const auto pending = static_cast<size_t>(state.range(0));
  EventQueue q;
  q.reserve(pending + 1);
  for (size_t i = 0; i < pending; ++i)
    q.push(Time::ps(delays[i % delays.size()]), static_cast<uint32_t>(i));
  size_t k = 0;
  for (auto _ : state) {
    const Event e = q.pop();
    q.push(e.time + Time::ps(delays[k++ & 4095]), e.payload);
    benchmark::DoNotOptimize(e);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

void BM_EventQueueHold(benchmark::State& state) {
  std::mt19937_64 rng(1);
  std::vector<int64_t> delays(4096);
  for (auto& d : delays) d = static_cast<int64_t>(rng() % 1'000'000);
  hold(state, delays);
}
BENCHMARK(BM_EventQueueHold)->Arg(64)->Arg(1024)->Arg(65536);

// Delays drawn from 8 values, as in a collective whose steps all take one of a few
// latencies and serialisation times: pending events share few distinct times.
void BM_EventQueueHoldFewTimes(benchmark::State& state) {
  std::mt19937_64 rng(3);
  std::vector<int64_t> delays(4096);
  for (auto& d : delays) d = static_cast<int64_t>(rng() % 8) * 125'000;
  hold(state, delays);
}
BENCHMARK(BM_EventQueueHoldFewTimes)->Arg(1024)->Arg(8192);

void BM_EventQueueFillDrain(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::mt19937_64 rng(2);
  std::vector<int64_t> times(n);
  for (auto& t : times) t = static_cast<int64_t>(rng() % 1'000'000'000);
  EventQueue q;
  q.reserve(n);
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) q.push(Time::ps(times[i]), static_cast<uint32_t>(i));
    while (!q.empty()) benchmark::DoNotOptimize(q.pop());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_EventQueueFillDrain)->Arg(1 << 16)->Arg(1 << 20);

}  // namespace
}  // namespace pipesim
