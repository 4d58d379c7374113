#include "scenario/internal/reader.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/input_file.h"

namespace pipesim::internal {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

std::string suggestion(std::string_view given, const std::vector<std::string>& candidates) {
  size_t best = std::numeric_limits<size_t>::max();
  std::string pick;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(given, c);
    if (d < best) {
      best = d;
      pick = c;
    }
  }
  if (!pick.empty() && best <= std::max<size_t>(2, given.size() / 3))
    return fmt::format("; did you mean '{}'?", pick);
  return {};
}

Reader Reader::nested(const std::string& file, const YAML::Node& n, const std::string& path) const {
  auto same = [](const std::string& a, const std::string& b) {
    std::error_code ea, eb;
    const auto ca = std::filesystem::weakly_canonical(a, ea);
    const auto cb = std::filesystem::weakly_canonical(b, eb);
    return (ea || eb) ? a == b : ca == cb;
  };
  std::vector<std::string> chain = outer_;
  chain.push_back(file_);
  for (const std::string& f : chain) {
    if (!same(f, file)) continue;
    fail(n, path,
         fmt::format("the files name each other in a cycle: {} -> {}", join(chain, " -> "), file),
         "files that do not include each other");
  }
  if (chain.size() >= kMaxFileNesting) {
    fail(n, path, fmt::format("files nested too deep: {} -> {}", join(chain, " -> "), file),
         fmt::format("at most {} files, the scenario included", kMaxFileNesting));
  }
  Reader inner(file, {});
  inner.outer_ = std::move(chain);
  return inner;
}

std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  require_utf8(text, source);
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (docs.size() > 1) {
      // A second document (after `---`) would be ignored: its line names it.
      const YAML::Mark m = docs[1].Mark();
      throw InputError(fmt::format("the file holds {} YAML documents", docs.size()),
                       "one document (no second '---')", "",
                       {source, m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1});
    }
    return docs.empty() ? YAML::Node() : docs.front();
  } catch (const YAML::DeepRecursion& e) {
    // (yaml-cpp says only "bad file" here.)
    throw InputError(fmt::format("the YAML is nested too deep ({} levels)", e.depth()),
                     fmt::format("fewer than {} levels of nesting", e.depth()), "",
                     {source, e.mark.is_null() ? 0 : e.mark.line + 1,
                      e.mark.is_null() ? 0 : e.mark.column + 1});
  } catch (const YAML::Exception& e) {
    throw InputError(
        fmt::format("invalid YAML: {}", e.msg), "a YAML mapping", "",
        {source, e.mark.is_null() ? 0 : e.mark.line + 1, e.mark.is_null() ? 0 : e.mark.column + 1});
  }
}

bool read_flag(const Reader& r, const YAML::Node& n, const std::string& p, bool fallback) {
  if (!n.IsDefined()) return fallback;
  return r.choice<bool>(n, p, {{"true", true}, {"false", false}});
}

int64_t read_repeat(const Reader& r, const YAML::Node& l, const std::string& p, size_t have) {
  const int64_t repeat =
      l["repeat"].IsDefined() ? r.integer(l["repeat"], p + ".repeat", 1, 100'000) : 1;
  if (static_cast<int64_t>(have) + repeat > 1'000'000)
    r.fail(l["repeat"], p + ".repeat", "the model would have more than 1,000,000 layers",
           "a smaller repeat");
  return repeat;
}

std::string repeated_name(const std::string& base, int64_t k, int64_t repeat) {
  return repeat > 1 ? fmt::format("{}.{}", base, k) : base;
}

void append_repeated(Model& m, const Layer& l, int64_t repeat) {
  for (int64_t k = 0; k < repeat; ++k) {
    m.layers.push_back(l);
    m.layers.back().name = repeated_name(l.name, k, repeat);
  }
}

}  // namespace pipesim::internal
