#include "core/units.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "core/checked.h"
#include "core/error.h"

namespace pipesim {
namespace {

__extension__ using Int128 = __int128;  // exact transfer-time arithmetic

struct Unit {
  std::string_view name;
  double scale;  // to the base unit (ps, bytes, bytes/s, FLOP/s, 1)
};

constexpr std::array kTime{Unit{"ps", 1.0}, Unit{"ns", 1e3}, Unit{"us", 1e6}, Unit{"ms", 1e9},
                           Unit{"s", 1e12}};
constexpr std::array kBytes{Unit{"B", 1.0},
                            Unit{"KB", 1e3},
                            Unit{"MB", 1e6},
                            Unit{"GB", 1e9},
                            Unit{"TB", 1e12},
                            Unit{"KiB", 1024.0},
                            Unit{"MiB", 1024.0 * 1024},
                            Unit{"GiB", 1024.0 * 1024 * 1024},
                            Unit{"TiB", 1024.0 * 1024 * 1024 * 1024}};
constexpr std::array kBandwidth{
    Unit{"B/s", 1.0},          Unit{"KB/s", 1e3},         Unit{"MB/s", 1e6},
    Unit{"GB/s", 1e9},         Unit{"TB/s", 1e12},        Unit{"GiB/s", 1024.0 * 1024 * 1024},
    Unit{"Mbit/s", 1e6 / 8.0}, Unit{"Gbit/s", 1e9 / 8.0}, Unit{"Gbps", 1e9 / 8.0}};
constexpr std::array kCompute{Unit{"GFLOPS", 1e9}, Unit{"TFLOPS", 1e12}, Unit{"PFLOPS", 1e15}};
constexpr std::array kCount{Unit{"", 1.0}, Unit{"K", 1e3}, Unit{"M", 1e6}, Unit{"B", 1e9}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits "<number> <unit>" and returns the value in the base unit.
template <size_t N>
double parse_quantity(std::string_view text, const std::array<Unit, N>& units,
                      std::string_view allowed, std::string_view example) {
  const std::string_view s = trim(text);
  double number = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), number);
  if (ec != std::errc() || s.empty()) {
    throw InputError(fmt::format("'{}' is not a quantity", text),
                     fmt::format("a number and a unit, e.g. '{}'; {}", example, allowed));
  }
  if (!std::isfinite(number))
    throw InputError(fmt::format("'{}' is not finite", text), std::string(allowed));
  if (number < 0) throw InputError(fmt::format("'{}' is negative", text), "a value >= 0");
  const std::string_view unit = trim(s.substr(static_cast<size_t>(ptr - s.data())));
  for (const Unit& u : units) {
    if (u.name == unit) return number * u.scale;
  }
  if (unit.empty()) {
    throw InputError(fmt::format("'{}' has no unit", text),
                     fmt::format("e.g. '{}'; {}", example, allowed));
  }
  throw InputError(fmt::format("unknown unit '{}' in '{}'", unit, text), std::string(allowed));
}

// `what`: the base unit ("1 ps", "1 byte"). A value above 0 that would round to 0 is an
// error, not a silent 0.
int64_t to_int64(double v, std::string_view text, std::string_view what) {
  const double r = std::round(v);
  if (r >= 9.2e18)
    throw InputError(fmt::format("'{}' is too large", text), "at most 9.2e18 in base units");
  if (v > 0 && r == 0)
    throw InputError(fmt::format("'{}' is less than {} and would count as 0", text, what),
                     fmt::format("0, or at least {}", what));
  return static_cast<int64_t>(r);
}

}  // namespace

Time parse_time(std::string_view text) {
  return Time::ps(to_int64(parse_quantity(text, kTime, kTimeUnits, "1.5 ms"), text, "1 ps"));
}

double parse_duration_s(std::string_view text) {
  constexpr std::array kDuration{Unit{"ps", 1e-12}, Unit{"ns", 1e-9},  Unit{"us", 1e-6},
                                 Unit{"ms", 1e-3},  Unit{"s", 1.0},    Unit{"min", 60.0},
                                 Unit{"h", 3600.0}, Unit{"d", 86400.0}};
  const double v = parse_quantity(text, kDuration, kDurationUnits, "50000 h");
  if (v > 3.2e12)  // 100,000 years
    throw InputError(fmt::format("'{}' is too long", text), "at most 100,000 years");
  return v;
}

int64_t parse_bytes(std::string_view text) {
  return to_int64(parse_quantity(text, kBytes, kByteUnits, "64 MiB"), text, "1 byte");
}

double parse_bandwidth(std::string_view text) {
  const double v = parse_quantity(text, kBandwidth, kBandwidthUnits, "25 Gbit/s");
  if (v <= 0) throw InputError(fmt::format("bandwidth '{}' must be positive", text), "a value > 0");
  return v;
}

double parse_flops(std::string_view text) {
  const double v = parse_quantity(text, kCompute, kComputeUnits, "312 TFLOPS");
  if (v <= 0)
    throw InputError(fmt::format("compute rate '{}' must be positive", text), "a value > 0");
  return v;
}

double parse_power(std::string_view text) {
  constexpr std::array kPower{Unit{"W", 1.0}, Unit{"kW", 1e3}};
  const double v = parse_quantity(text, kPower, kPowerUnits, "500 W");
  if (v <= 0) throw InputError(fmt::format("power '{}' must be positive", text), "a value > 0");
  return v;
}

double parse_share(std::string_view text) {
  constexpr std::array kShare{Unit{"", 1.0}, Unit{"%", 0.01}};
  const double v = parse_quantity(text, kShare, kShareUnits, "10%");
  if (!(v >= 0 && v < 1))
    throw InputError(fmt::format("'{}' is not a share in [0, 1)", text), std::string(kShareUnits));
  return v;
}

int64_t parse_count(std::string_view text) {
  const double v = parse_quantity(text, kCount, kCountUnits, "138M");
  // Whole after scaling, up to the rounding of reading the decimal and multiplying by the
  // suffix (a few units in the last place): 1.5K = 1500 is, 1.0000001K = 1000.0001 is not.
  if (std::abs(v - std::round(v)) >
      std::max(1e-9, 16 * std::numeric_limits<double>::epsilon() * std::abs(v))) {
    throw InputError(fmt::format("'{}' is not a whole number", text), std::string(kCountUnits));
  }
  return to_int64(v, text, "1");
}

Time serialization_time(int64_t bytes, double bytes_per_s) {
  PIPESIM_ASSERT(bytes >= 0 && bytes_per_s > 0, "bytes and bandwidth must be positive");
  if (bytes == 0) return Time::zero();
  if (bytes_per_s == std::floor(bytes_per_s) && bytes_per_s < 9e18) {
    // ceil(bytes * 1e12 / bw) in 128-bit integers: exact.
    const auto bw = static_cast<Int128>(bytes_per_s);
    const Int128 num = static_cast<Int128>(bytes) * 1'000'000'000'000;
    const Int128 q = (num + bw - 1) / bw;
    if (q >= std::numeric_limits<int64_t>::max())
      too_large(fmt::format("a transfer of {} bytes", bytes));
    return Time::ps(static_cast<int64_t>(q));
  }
  const long double ps = std::ceil(static_cast<long double>(bytes) * 1e12L / bytes_per_s);
  if (!(ps < 9.2e18L)) too_large(fmt::format("a transfer of {} bytes", bytes));
  return Time::ps(static_cast<int64_t>(ps));
}

std::string format_bytes(int64_t bytes) {
  constexpr std::array<std::pair<double, std::string_view>, 4> steps{
      {{1024.0 * 1024 * 1024 * 1024, "TiB"},
       {1024.0 * 1024 * 1024, "GiB"},
       {1024.0 * 1024, "MiB"},
       {1024.0, "KiB"}}};
  const auto b = static_cast<double>(bytes);
  for (const auto& [scale, name] : steps) {
    if (std::abs(b) >= scale) return fmt::format("{:.2f} {}", b / scale, name);
  }
  return fmt::format("{} B", bytes);
}

std::string format_time(Time t) {
  const double s = t.seconds();
  if (s >= 1.0) return fmt::format("{:.4f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} us", s * 1e6);
}

}  // namespace pipesim
