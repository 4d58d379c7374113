#include "sweep/grid.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>
#include <set>

#include "core/error.h"

namespace pipesim {
namespace {

constexpr const char* kGridForm =
    "KEY=VALUES with VALUES a,b,c, an integer range 1..64 or a doubling range 1..64*2";

[[noreturn]] void malformed(const std::string& what) {
  throw InputError(what, kGridForm, "", {"--grid"});
}

std::optional<int64_t> whole_number(std::string_view s) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// "A..B" or "A..B*K" with whole numbers; nullopt when `item` is not range-shaped at all.
std::optional<std::vector<std::string>> expand_range(const std::string& key,
                                                     const std::string& item) {
  const auto dots = item.find("..");
  if (dots == std::string::npos || item.find_first_not_of("0123456789.*-+") != std::string::npos)
    return std::nullopt;  // a path such as ../profile.csv is a value, not a range
  const std::string_view text(item);
  const auto star = item.find('*', dots);
  const auto first = whole_number(text.substr(0, dots));
  const auto last = whole_number(
      text.substr(dots + 2, star == std::string::npos ? std::string::npos : star - dots - 2));
  const auto factor =
      star == std::string::npos ? std::optional<int64_t>(1) : whole_number(text.substr(star + 1));
  if (!first || !last || !factor)
    malformed(fmt::format("{}: '{}' is not a range of whole numbers", key, item));
  if (*first > *last)
    malformed(fmt::format("{}: the range '{}' is empty (its start is past its end)", key, item));
  std::vector<std::string> out;
  if (*factor == 1 && star == std::string::npos) {
    if (static_cast<uint64_t>(*last) - static_cast<uint64_t>(*first) >= kMaxSweepPoints)
      malformed(
          fmt::format("{}: the range '{}' has more than {} values", key, item, kMaxSweepPoints));
    for (int64_t v = *first;; ++v) {
      out.push_back(std::to_string(v));
      if (v == *last) break;
    }
    return out;
  }
  if (*factor < 2 || *first < 1)
    malformed(
        fmt::format("{}: the doubling range '{}' needs a start of at least 1 and a factor "
                    "of at least 2",
                    key, item));
  for (int64_t v = *first;;) {
    out.push_back(std::to_string(v));
    if (v > *last / *factor) break;  // the next would pass the end (or overflow)
    v *= *factor;
  }
  return out;
}

// Splits at the commas that are outside {}, [] and quotes.
std::vector<std::string> split_items(const std::string& key, const std::string& values) {
  std::vector<std::string> items;
  std::string cur, open;  // `open`: the brackets not yet closed, innermost last
  char quote = 0;
  for (const char c : values) {
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '{' || c == '[') {
      open.push_back(c);
    } else if (c == '}' || c == ']') {
      if (open.empty() || (c == '}') != (open.back() == '{'))
        malformed(fmt::format("{}: unbalanced '{}' in '{}'", key, c, values));
      open.pop_back();
    } else if (c == ',' && open.empty()) {
      items.push_back(cur);
      cur.clear();
      continue;
    }
    cur.push_back(c);
  }
  if (quote != 0) malformed(fmt::format("{}: unclosed quote {} in '{}'", key, quote, values));
  if (!open.empty()) malformed(fmt::format("{}: unclosed '{}' in '{}'", key, open.back(), values));
  items.push_back(cur);
  return items;
}

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

GridAxis parse_grid_axis(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) malformed(fmt::format("'{}' is not KEY=VALUES", text));
  GridAxis axis;
  axis.key = text.substr(0, eq);
  if (axis.key.find_first_of(" \t") != std::string::npos || axis.key.front() == '.' ||
      axis.key.back() == '.' || axis.key.find("..") != std::string::npos)
    malformed(fmt::format("'{}' is not a dotted key such as training.micro_batch", axis.key));
  const std::string values = text.substr(eq + 1);
  for (const std::string& raw : split_items(axis.key, values)) {
    const std::string item = trimmed(raw);
    if (item.empty()) malformed(fmt::format("{}: an empty value in '{}'", axis.key, values));
    if (auto range = expand_range(axis.key, item)) {
      for (std::string& v : *range) axis.values.push_back(std::move(v));
    } else {
      axis.values.push_back(item);
    }
    if (axis.values.size() > kMaxSweepPoints)
      malformed(fmt::format("{}: more than {} values", axis.key, kMaxSweepPoints));
  }
  return axis;
}

Grid::Grid(std::vector<GridAxis> axes, bool zip) : axes_(std::move(axes)), zip_(zip) {
  std::set<std::string> keys;
  for (const GridAxis& a : axes_) {
    if (a.values.empty()) malformed(fmt::format("{}: no values", a.key));
    if (!keys.insert(a.key).second)
      malformed(fmt::format("{}: swept by two --grid options", a.key));
  }
  if (zip_ && !axes_.empty()) {
    size_ = axes_.front().values.size();
    for (const GridAxis& a : axes_) {
      if (a.values.size() != size_)
        throw InputError(fmt::format("--zip needs lists of one length; {} has {} values, {} has {}",
                                     axes_.front().key, size_, a.key, a.values.size()),
                         "as many values for every --grid key", "", {"--grid"});
    }
    return;
  }
  for (const GridAxis& a : axes_) {
    if (size_ > kMaxSweepPoints / a.values.size())
      throw InputError(fmt::format("the grid has more than {} points", kMaxSweepPoints),
                       "fewer values, or --zip to pair the lists", "", {"--grid"});
    size_ *= a.values.size();
  }
}

std::vector<size_t> Grid::indices(size_t i) const {
  std::vector<size_t> out(axes_.size());
  for (size_t a = axes_.size(); a-- > 0;) {
    const size_t n = axes_[a].values.size();
    out[a] = zip_ ? i : i % n;
    if (!zip_) i /= n;
  }
  return out;
}

std::vector<Override> Grid::overrides(size_t i) const {
  const std::vector<size_t> idx = indices(i);
  std::vector<Override> out;
  for (size_t a = 0; a < axes_.size(); ++a) out.push_back({axes_[a].key, axes_[a].values[idx[a]]});
  return out;
}

}  // namespace pipesim
