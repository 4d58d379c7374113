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

// The 1-based line where a second YAML document starts, or 0: a `---` marker after any
// content, or content after a `...` end marker (markers at the start of a line, as YAML
// has them; comments and blank lines are not content).
int second_document_line(std::string_view text) {
  bool content = false, ended = false;
  int line = 0;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view l = text.substr(at, end - at);
    ++line;
    at = end + 1;
    const auto marker = [&](std::string_view m) {
      return l.starts_with(m) && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    };
    const size_t first = l.find_first_not_of(" \t\r");
    const bool blank = first == std::string_view::npos || l[first] == '#';
    if (marker("---")) {
      if (content || ended) return line;
      const size_t rest = l.find_first_not_of(" \t\r", 3);
      content = rest != std::string_view::npos && l[rest] != '#';  // `--- value`
      continue;
    }
    if (marker("...")) {
      ended = true;
      continue;
    }
    if (blank) continue;
    if (ended) return line;
    content = true;
  }
  return 0;
}

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  require_utf8(text, source);
  // A second document would be ignored (YAML::Load reads the first; yaml-cpp's LoadAll
  // can loop for ever on malformed input, so the markers are looked for here).
  if (const int line = second_document_line(text); line > 0)
    throw InputError("the file holds a second YAML document", "one document (no second '---')",
                     "", {source, line, 1});
  try {
    return YAML::Load(text);
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
