// Internals of the scenario loader shared by its section readers: the Reader that walks
// one YAML document with locations, "did you mean" suggestions and the small readers
// (flags, repeats, files) more than one section uses. Not part of the public interface.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/units.h"
#include "schedules/model.h"

namespace pipesim::internal {

size_t edit_distance(std::string_view a, std::string_view b);
std::string join(const std::vector<std::string>& items, std::string_view sep = ", ");
// "; did you mean 'x'?" when a candidate is close enough, else "".
std::string suggestion(std::string_view given, const std::vector<std::string>& candidates);
std::string child_path(const std::string& parent, std::string_view key);

// How many files deep a scenario may name others (the scenario, an included model, a
// profile it names, ...), so that a chain of files cannot recurse without end.
inline constexpr size_t kMaxFileNesting = 4;

// Reads one YAML document with locations and the list of keys set by --set.
class Reader {
 public:
  Reader(std::string file, std::vector<std::string> overridden)
      : file_(std::move(file)), overridden_(std::move(overridden)) {}

  // A Reader for `file`, named by this one's document at node `n` (key `path`): an
  // included model or a YAML profile. Refuses a file that is already being read (naming
  // the cycle) and a chain deeper than kMaxFileNesting.
  Reader nested(const std::string& file, const YAML::Node& n, const std::string& path) const;

  Location where(const YAML::Node& n, const std::string& path) const {
    // Under an override's key, or a mapping an override created on the way to its key
    // (no place in the file): the --set option, not the file.
    const bool created = n.IsDefined() && n.Mark().is_null();
    for (const auto& o : overridden_) {
      if (path == o || path.starts_with(o + ".") || (created && o.starts_with(path + ".")))
        return {"--set", 0, 0};
    }
    if (!n.IsDefined()) return {file_, 0, 0};
    const YAML::Mark m = n.Mark();
    if (m.is_null()) return {file_, 0, 0};
    return {file_, m.line + 1, m.column + 1};
  }

  [[noreturn]] void fail(const YAML::Node& n, const std::string& path, std::string what,
                         std::string allowed = {}) const {
    throw InputError(std::move(what), std::move(allowed), path, where(n, path));
  }

  // Runs f; an InputError without key/location thrown inside gets this node's.
  template <typename F>
  auto at(const YAML::Node& n, const std::string& path, F&& f) const {
    try {
      return f();
    } catch (InputError& e) {
      e.set_key_if_empty(path);
      e.set_location_if_empty(where(n, path));
      throw;
    }
  }

  void expect_map(const YAML::Node& n, const std::string& path,
                  const std::vector<std::string>& keys) const {
    if (!n.IsMap())
      fail(n, path, fmt::format("expected a mapping, got {}", kind(n)), "keys: " + join(keys));
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar())
        fail(it->first, path, "a key must be a plain name", "keys: " + join(keys));
      const auto key = it->first.Scalar();
      const std::string p = child_path(path, key);
      if (!seen.insert(key).second) fail(it->first, p, "duplicate key", "each key once");
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        fail(it->first, p, "unknown key" + suggestion(key, keys), "keys here: " + join(keys));
      }
    }
  }

  YAML::Node require(const YAML::Node& map, const std::string& path, const std::string& key) const {
    const YAML::Node c = map[key];
    if (!c.IsDefined() || c.IsNull()) fail(map, child_path(path, key), "missing required key");
    return c;
  }

  // What a node is, for messages; a scalar is quoted, cut short when long.
  static std::string kind(const YAML::Node& n) {
    if (!n.IsScalar()) return shape(n);
    const std::string& s = n.Scalar();
    if (s.size() <= 60) return fmt::format("'{}'", s);
    size_t cut = 48;  // at a character boundary
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    return fmt::format("'{}...' ({} bytes)", s.substr(0, cut), s.size());
  }
  // What a node is without its content: for a document that may not be ours to quote.
  static std::string shape(const YAML::Node& n) {
    if (n.IsMap()) return "a mapping";
    if (n.IsSequence()) return "a list";
    if (n.IsNull() || !n.IsDefined()) return "nothing";
    return "a single value";
  }

  std::string scalar(const YAML::Node& n, const std::string& path,
                     const std::string& allowed = "a string") const {
    if (!n.IsScalar())
      fail(n, path, fmt::format("expected a single value, got {}", kind(n)), allowed);
    return n.Scalar();
  }

  int64_t integer(const YAML::Node& n, const std::string& path, int64_t lo, int64_t hi) const {
    const std::string allowed = hi == std::numeric_limits<int64_t>::max()
                                    ? fmt::format("a whole number >= {}", lo)
                                    : fmt::format("a whole number from {} to {}", lo, hi);
    const std::string s = scalar(n, path, allowed);
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size())
      fail(n, path, fmt::format("'{}' is not a whole number", s), allowed);
    if (v < lo || v > hi) fail(n, path, fmt::format("{} is out of range", v), allowed);
    return v;
  }

  // A plain number in [lo, hi].
  double real(const YAML::Node& n, const std::string& path, double lo, double hi) const {
    const std::string allowed = fmt::format("a number from {} to {}", lo, hi);
    const std::string s = scalar(n, path, allowed);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0' || !(v == v))
      fail(n, path, fmt::format("'{}' is not a number", s), allowed);
    if (!(v >= lo && v <= hi)) fail(n, path, fmt::format("{} is out of range", s), allowed);
    return v;
  }

  template <typename Parse>
  auto quantity(const YAML::Node& n, const std::string& path, Parse parse,
                std::string_view units) const {
    const std::string s = scalar(n, path, std::string(units));
    return at(n, path, [&] { return parse(s); });
  }
  Time time(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_time, kTimeUnits);
  }
  double duration_s(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_duration_s, kDurationUnits);
  }
  int64_t bytes(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_bytes, kByteUnits);
  }
  double bandwidth(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_bandwidth, kBandwidthUnits);
  }
  double flops(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_flops, kComputeUnits);
  }
  double power(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_power, kPowerUnits);
  }
  int64_t count(const YAML::Node& n, const std::string& p) const {
    return quantity(n, p, parse_count, kCountUnits);
  }

  template <typename E>
  E choice(const YAML::Node& n, const std::string& path,
           const std::vector<std::pair<std::string, E>>& options) const {
    std::vector<std::string> names;
    for (const auto& [name, v] : options) names.push_back(name);
    const std::string s = scalar(n, path, join(names, " | "));
    for (const auto& [name, v] : options) {
      if (name == s) return v;
    }
    fail(n, path, fmt::format("unknown value '{}'{}", s, suggestion(s, names)), join(names, " | "));
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::vector<std::string> overridden_;
  std::vector<std::string> outer_;  // the files that led here, outermost first
};

YAML::Node parse_yaml(const std::string& text, const std::string& source);
// The 1-based line where a second YAML document starts in `text`, or 0 (parse_yaml refuses
// a second document, which would be ignored).
int second_document_line(std::string_view text);
bool read_flag(const Reader& r, const YAML::Node& n, const std::string& p, bool fallback);
// A layer entry's `repeat` (1 when absent), keeping the model within 1,000,000 layers.
int64_t read_repeat(const Reader& r, const YAML::Node& l, const std::string& p, size_t have);
// Copy k of a repeated layer is NAME.k; a layer given once keeps its name.
std::string repeated_name(const std::string& base, int64_t k, int64_t repeat);
void append_repeated(Model& m, const Layer& l, int64_t repeat);

}  // namespace pipesim::internal
