// Arithmetic on user-sized quantities (bytes, parameters, picoseconds). A scenario can
// ask for more than 64 bits hold (a layer of 3e18 parameters, a 1 PB transfer at 1 B/s);
// that is bad input, reported as InputError, never undefined behaviour.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "core/time.h"

namespace pipesim {

[[noreturn]] void too_large(std::string_view what);

// Ceiling of a / b for a >= 0, b > 0, without the overflow of (a + b - 1) / b near the top
// of the range.
constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return a / b + (a % b != 0);
}

inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) too_large(what);
  return r;
}

inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) too_large(what);
  return r;
}

inline Time checked_mul(Time a, int64_t k, std::string_view what) {
  return Time::ps(checked_mul(a.ps_count(), k, what));
}

inline Time checked_add(Time a, Time b, std::string_view what) {
  return Time::ps(checked_add(a.ps_count(), b.ps_count(), what));
}

// `t` times `factor` (>= 0: a GPU's pace, a slowdown, a peak ratio), to the nearest
// picosecond; too large past the range of Time.
inline Time checked_scale(Time t, double factor, std::string_view what) {
  if (factor == 1.0) return t;
  const long double scaled = static_cast<long double>(t.ps_count()) * factor;
  if (!(scaled < 9.2e18L)) too_large(what);
  return Time::ps(std::llround(scaled));
}

}  // namespace pipesim
