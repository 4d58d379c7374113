// Simulated time: a strong integer type counting picoseconds.
//
// int64 picoseconds give about 106 days of range, far beyond any training run we
// simulate, and are fine enough that a byte over a 900 GB/s link is still ~1 ps.
// Floating point never touches time inside the simulator: seconds appear only at
// the output edge (reports), so equal inputs give equal event orders on every machine.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace pipesim {

// Thrown as bad input (InputError, "too large to simulate") when Time arithmetic would
// leave 64 bits: a scenario can ask for that, and it must never be undefined behaviour.
[[noreturn]] void time_overflow();

class Time {
 public:
  constexpr Time() = default;

  static constexpr Time ps(int64_t v) { return Time(v); }
  static constexpr Time ns(int64_t v) { return Time(v * 1'000); }
  static constexpr Time us(int64_t v) { return Time(v * 1'000'000); }
  static constexpr Time ms(int64_t v) { return Time(v * 1'000'000'000); }
  static constexpr Time s(int64_t v) { return Time(v * 1'000'000'000'000); }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time max() { return Time(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ps_count() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double microseconds() const { return static_cast<double>(ps_) * 1e-6; }

  constexpr Time& operator+=(Time o) { return *this = *this + o; }
  constexpr Time& operator-=(Time o) { return *this = *this - o; }
  friend constexpr Time operator+(Time a, Time b) {
    int64_t r = 0;
    if (__builtin_add_overflow(a.ps_, b.ps_, &r)) time_overflow();
    return Time(r);
  }
  friend constexpr Time operator-(Time a, Time b) {
    int64_t r = 0;
    if (__builtin_sub_overflow(a.ps_, b.ps_, &r)) time_overflow();
    return Time(r);
  }
  friend constexpr Time operator*(Time a, int64_t k) {
    int64_t r = 0;
    if (__builtin_mul_overflow(a.ps_, k, &r)) time_overflow();
    return Time(r);
  }
  friend constexpr Time operator*(int64_t k, Time a) { return a * k; }
  // Integer division rounding toward zero; callers that split work use it knowingly.
  friend constexpr Time operator/(Time a, int64_t k) { return Time(a.ps_ / k); }
  friend constexpr auto operator<=>(Time a, Time b) = default;

 private:
  constexpr explicit Time(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

constexpr Time max(Time a, Time b) {
  return a < b ? b : a;
}
constexpr Time min(Time a, Time b) {
  return a < b ? a : b;
}
// `share` (from 0 to 1) of a time, to the nearest picosecond.
inline Time share_of(Time t, double share) {
  return Time::ps(std::llround(static_cast<double>(t.ps_count()) * share));
}

}  // namespace pipesim
