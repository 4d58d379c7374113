// Physical quantities written as strings with units ("1.5 ms", "25 Gbit/s", "80 GiB").
//
// Every parser throws InputError naming the accepted units when the text is not a
// non-negative number followed by one of them; the scenario loader adds file/line/key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/time.h"

namespace pipesim {

inline constexpr std::string_view kTimeUnits = "units: ps, ns, us, ms, s";
inline constexpr std::string_view kByteUnits =
    "units: B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024)";
inline constexpr std::string_view kBandwidthUnits =
    "units: B/s, KB/s, MB/s, GB/s, TB/s, GiB/s, Mbit/s, Gbit/s, Gbps";
inline constexpr std::string_view kComputeUnits = "units: GFLOPS, TFLOPS, PFLOPS";
inline constexpr std::string_view kPowerUnits = "units: W, kW";
inline constexpr std::string_view kCountUnits =
    "a whole number, optionally with K, M or B (10^3, 10^6, 10^9)";

Time parse_time(std::string_view text);
// A duration that may run to years (failure rates, checkpoint intervals), in seconds.
inline constexpr std::string_view kDurationUnits = "units: ps, ns, us, ms, s, min, h, d";
double parse_duration_s(std::string_view text);
int64_t parse_bytes(std::string_view text);
double parse_bandwidth(std::string_view text);  // bytes per second
double parse_flops(std::string_view text);      // floating-point operations per second
double parse_power(std::string_view text);      // watts, > 0
int64_t parse_count(std::string_view text);     // "138M" -> 138000000
// A share: "10%", "0.5 %" or a plain fraction "0.1", in [0, 1) (else InputError).
inline constexpr std::string_view kShareUnits = "a share such as 10% or 0.1, at least 0, below 1";
double parse_share(std::string_view text);

// Time to push `bytes` through a pipe of `bytes_per_s`, rounded up to the next picosecond.
// Exact (integer arithmetic) whenever the bandwidth is a whole number of bytes per second.
Time serialization_time(int64_t bytes, double bytes_per_s);

// Human-readable forms for tables (never parsed back).
std::string format_bytes(int64_t bytes);  // "1.50 GiB"
std::string format_time(Time t);          // "12.345 ms"

}  // namespace pipesim
