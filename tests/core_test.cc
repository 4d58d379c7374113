// Units, time, the event queue and the per-op arrays.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <set>

#include "core/error.h"
#include "core/pod_array.h"
#include "core/units.h"
#include "sim/event_queue.h"

namespace pipesim {
namespace {

TEST(Time, FactoriesAgree) {
  EXPECT_EQ(Time::ns(1), Time::ps(1'000));
  EXPECT_EQ(Time::us(1), Time::ns(1'000));
  EXPECT_EQ(Time::ms(1), Time::us(1'000));
  EXPECT_EQ(Time::s(1), Time::ms(1'000));
  EXPECT_EQ(Time::ms(3) + Time::ms(2), Time::ms(5));
  EXPECT_EQ(Time::ms(3) - Time::ms(5), Time::ms(-2));
  EXPECT_EQ(Time::ms(3) * 4, Time::ms(12));
  EXPECT_LT(Time::ns(999), Time::us(1));
  EXPECT_DOUBLE_EQ(Time::ms(1500).seconds(), 1.5);
  // 106 days of range: int64 max ps = 9.22e6 s.
  EXPECT_GT(Time::max().seconds(), 106.0 * 24 * 3600);
}

TEST(Units, TimeUnits) {
  EXPECT_EQ(parse_time("1.5 ms"), Time::us(1500));
  EXPECT_EQ(parse_time("1.5ms"), Time::us(1500));
  EXPECT_EQ(parse_time("250 ns"), Time::ps(250'000));
  EXPECT_EQ(parse_time("7 ps"), Time::ps(7));
  EXPECT_EQ(parse_time("10 us"), Time::us(10));
  EXPECT_EQ(parse_time("3 s"), Time::s(3));
  EXPECT_EQ(parse_time("0 us"), Time::zero());
  EXPECT_EQ(parse_time("0.1 ms"), Time::us(100));  // rounds to the nearest ps
}

TEST(Units, ByteUnits) {
  EXPECT_EQ(parse_bytes("64 MiB"), 64LL * 1024 * 1024);
  EXPECT_EQ(parse_bytes("1 KB"), 1000);
  EXPECT_EQ(parse_bytes("1 KiB"), 1024);
  EXPECT_EQ(parse_bytes("80 GiB"), 80LL << 30);
  EXPECT_EQ(parse_bytes("1.5 GB"), 1'500'000'000);
  EXPECT_EQ(parse_bytes("2 TB"), 2'000'000'000'000);
  EXPECT_EQ(parse_bytes("1 TiB"), 1LL << 40);
  EXPECT_EQ(parse_bytes("12 B"), 12);
  EXPECT_EQ(parse_bytes("3 MB"), 3'000'000);
}

TEST(Units, AValueThatWouldRoundToZeroIsAnError) {
  // Once silently 0: a layer of no time, an activation of no bytes.
  EXPECT_THROW(parse_time("1e-30 ms"), InputError);
  EXPECT_THROW(parse_time("0.4 ps"), InputError);
  EXPECT_THROW(parse_bytes("0.4 B"), InputError);
  EXPECT_EQ(parse_time("0.6 ps"), Time::ps(1));  // rounds to the nearest, as before
  EXPECT_EQ(parse_bytes("0 B"), 0);
}

TEST(Units, BandwidthUnits) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("25 Gbit/s"), 25e9 / 8);
  EXPECT_DOUBLE_EQ(parse_bandwidth("10 Gbps"), 10e9 / 8);
  EXPECT_DOUBLE_EQ(parse_bandwidth("100 Mbit/s"), 100e6 / 8);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1 GiB/s"), 1024.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_bandwidth("16 GB/s"), 16e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("2 TB/s"), 2e12);
  EXPECT_DOUBLE_EQ(parse_bandwidth("5 MB/s"), 5e6);
  EXPECT_DOUBLE_EQ(parse_bandwidth("5 KB/s"), 5e3);
  EXPECT_DOUBLE_EQ(parse_bandwidth("5 B/s"), 5);
}

TEST(Units, ComputeAndCounts) {
  EXPECT_DOUBLE_EQ(parse_flops("312 TFLOPS"), 312e12);
  EXPECT_DOUBLE_EQ(parse_flops("1 PFLOPS"), 1e15);
  EXPECT_DOUBLE_EQ(parse_flops("500 GFLOPS"), 500e9);
  EXPECT_EQ(parse_count("138M"), 138'000'000);
  EXPECT_EQ(parse_count("10K"), 10'000);
  EXPECT_EQ(parse_count("1.5B"), 1'500'000'000);
  EXPECT_EQ(parse_count("12"), 12);
}

void expect_input_error(auto fn, const std::string& fragment) {
  try {
    fn();
    FAIL() << "expected InputError mentioning '" << fragment << "'";
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find(fragment), std::string::npos) << e.message();
  }
}

TEST(Units, RejectsBadQuantities) {
  expect_input_error([] { parse_time("5"); }, "has no unit");
  expect_input_error([] { parse_time("5 parsecs"); }, "unknown unit 'parsecs'");
  expect_input_error([] { parse_time("5 MS"); }, "unknown unit 'MS'");  // case-sensitive
  expect_input_error([] { parse_time("-1 ms"); }, "is negative");
  expect_input_error([] { parse_time("fast"); }, "is not a quantity");
  expect_input_error([] { parse_time("inf ms"); }, "not finite");
  expect_input_error([] { parse_bytes("1e30 TB"); }, "too large");
  expect_input_error([] { parse_bandwidth("0 GB/s"); }, "must be positive");
  expect_input_error([] { parse_bytes("4 GB/s"); }, "unknown unit 'GB/s'");
  expect_input_error([] { parse_count("1.5"); }, "not a whole number");
  // Whole after the suffix's scaling: 1.0000001K = 1000.0001, 2.0000000001B = 2000000000.1.
  expect_input_error([] { parse_count("1.0000001K"); }, "not a whole number");
  expect_input_error([] { parse_count("2.0000000001B"); }, "not a whole number");
  EXPECT_EQ(parse_count("1.5K"), 1'500);
  EXPECT_EQ(parse_count("1.1M"), 1'100'000);
  EXPECT_EQ(parse_count("0.001K"), 1);
  EXPECT_EQ(parse_count("175.123456789B"), 175'123'456'789);
  // The message lists what is allowed.
  expect_input_error([] { parse_bandwidth("3 furlongs"); }, "Gbit/s");
}

TEST(Units, SerializationTimeIsExactAndRoundsUp) {
  // 8 MiB at 25 GB/s = 8388608 / 25e9 s = 335544.32 ns exactly.
  EXPECT_EQ(serialization_time(8 * 1024 * 1024, 25e9), Time::ps(335'544'320));
  // 1 byte at 3 B/s = 1/3 s = 333333333333.33 ps, rounded up.
  EXPECT_EQ(serialization_time(1, 3.0), Time::ps(333'333'333'334));
  // 25 Gbit/s = 3.125e9 B/s: 3125 bytes take exactly 1 us.
  EXPECT_EQ(serialization_time(3125, parse_bandwidth("25 Gbit/s")), Time::us(1));
  // A non-integral rate takes the floating-point path and still rounds up.
  EXPECT_EQ(serialization_time(1, 2.5), Time::ps(400'000'000'000));
  EXPECT_EQ(serialization_time(0, 1.0), Time::zero());
}

TEST(InputError, MessageFormat) {
  const InputError e("must be positive", "a value > 0", "cluster.nodes", {"s.yaml", 3, 10});
  EXPECT_EQ(e.message(), "s.yaml:3:10: cluster.nodes: must be positive (a value > 0)");
  InputError inner("bad", "good");
  inner.set_key_if_empty("model.layers.0.forward");
  inner.set_location_if_empty({"f.yaml", 7, 16});
  EXPECT_EQ(inner.message(), "f.yaml:7:16: model.layers.0.forward: bad (good)");
}

TEST(EventQueue, OrdersByTimeThenSchedulingOrder) {
  EventQueue q;
  q.push(Time::us(5), 0);
  q.push(Time::us(1), 1);
  q.push(Time::us(5), 2);
  q.push(Time::us(1), 3);
  q.push(Time::us(0), 4);
  std::vector<uint32_t> got;
  while (!q.empty()) got.push_back(q.pop().payload);
  EXPECT_EQ(got, (std::vector<uint32_t>{4, 1, 3, 0, 2}));
}

TEST(EventQueue, RandomPushPopMatchesSortedOrder) {
  // Property: whatever the interleaving of pushes and pops, pops come out in
  // (time, seq) order among the events present, and every event comes out once.
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    EventQueue q;
    std::vector<Event> reference;
    uint64_t seq = 0;
    Time last = Time::zero();
    size_t popped = 0;
    for (int step = 0; step < 2000; ++step) {
      if (q.empty() || rng() % 3 != 0) {
        const Time t = last + Time::ns(static_cast<int64_t>(rng() % 8));
        q.push(t, static_cast<uint32_t>(seq));
        reference.push_back({t, static_cast<uint32_t>(seq), static_cast<uint32_t>(seq)});
        ++seq;
      } else {
        auto best = std::min_element(reference.begin(), reference.end(), event_before);
        const Event e = q.pop();
        EXPECT_EQ(e.payload, best->payload);
        EXPECT_GE(e.time, last);
        last = e.time;
        reference.erase(best);
        ++popped;
      }
    }
    EXPECT_EQ(popped + q.size(), seq);
  }
}

TEST(EventQueue, ManyTimesSharingCacheLinesKeepOrder) {
  // More distinct pending times (4096) than the queue's time cache has lines (1024), so
  // pushes for a time whose chain the cache lost start a second chain of that time; pops
  // must still come out in (time, seq) order. Times repeat (4096 values per round) and pops
  // interleave with pushes, including pushes at the time being popped.
  std::mt19937_64 rng(7);
  EventQueue q;
  std::set<EventKey> reference;  // (time, seq, payload = seq)
  uint32_t seq = 0;
  Time now = Time::zero();
  auto push = [&](Time t) {
    q.push(t, seq);
    reference.insert(event_key({t, seq, seq}));
    ++seq;
  };
  auto pop_and_check = [&] {
    const Event e = q.pop();
    ASSERT_FALSE(reference.empty());
    EXPECT_EQ(event_key(e), *reference.begin());
    reference.erase(reference.begin());
    now = e.time;
  };
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 4096; ++i)
      push(now + Time::ps(static_cast<int64_t>(rng() % 4096) * 1000 + round % 2));
    for (int i = 0; i < 3000; ++i) {
      pop_and_check();
      if (i % 7 == 0) push(now);  // behind the events already at the current time
    }
  }
  while (!q.empty()) pop_and_check();
  EXPECT_TRUE(reference.empty());
  EXPECT_EQ(q.size(), 0u);
}

// A PodArray keeps every element as it grows from the heap into pages of its own and on
// through remapped pages (kPodPagesFrom is 1 MiB: 16 K of these 64-byte elements), those
// pages stay at a huge-page boundary (Linux), and its copies and moves hold the same
// elements.
TEST(PodArray, KeepsItsElementsAcrossEveryWayOfGrowing) {
  struct Row {
    int64_t a[8];
  };
  static_assert(sizeof(Row) == 64);
  PodArray<Row> v;
  constexpr int64_t n = 200'000;  // 12.8 MB: heap, then own pages, then four remaps
  for (int64_t i = 0; i < n; ++i) v.push_back(Row{{i, -i, 0, 0, 0, 0, 0, 3 * i}});
  ASSERT_EQ(v.size(), static_cast<size_t>(n));
  EXPECT_GE(v.capacity() * sizeof(Row), 4 * kPodPagesFrom);
#if defined(__linux__)
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (uintptr_t{2} << 20), 0u);
#endif
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(v[static_cast<size_t>(i)].a[0], i);
    ASSERT_EQ(v[static_cast<size_t>(i)].a[7], 3 * i);
  }
  PodArray<Row> copy = v;
  EXPECT_EQ(copy.size(), v.size());
  EXPECT_EQ(std::memcmp(copy.data(), v.data(), v.size() * sizeof(Row)), 0);
  PodArray<Row> moved = std::move(v);
  EXPECT_EQ(moved.size(), static_cast<size_t>(n));
  EXPECT_EQ(moved.back().a[1], -(n - 1));
  moved.resize(n + 5);
  EXPECT_EQ(moved[static_cast<size_t>(n) + 4].a[0], 0);
  EXPECT_EQ(moved[static_cast<size_t>(n) - 1].a[0], n - 1);
  int64_t sum = 0;
  for (const Row& r : std::span<const Row>(copy)) sum += r.a[0];
  EXPECT_EQ(sum, n * (n - 1) / 2);
  // Copied into an array that owns pages already; an element pushed onto its own array as
  // that array grows (the growth moves it).
  PodArray<Row> small;
  small.push_back(Row{{7}});
  copy = small;
  EXPECT_EQ(copy.size(), 1u);
  EXPECT_EQ(copy[0].a[0], 7);
  for (int i = 0; i < 20; ++i) small.push_back(small[0]);
  moved.resize(moved.capacity());
  moved.push_back(moved[5]);
  EXPECT_EQ(small.back().a[0], 7);
  EXPECT_EQ(moved.back().a[0], 5);
}

}  // namespace
}  // namespace pipesim
