// `--set KEY=VALUE`: parsing the option and applying it to the YAML document.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <sstream>

#include "core/error.h"
#include "core/input_file.h"
#include "scenario/internal/reader.h"
#include "scenario/internal/sections.h"
#include "scenario/scenario.h"

namespace pipesim {
namespace internal {

void apply_override(YAML::Node& root, const Override& o) {
  require_utf8(o.key, "--set");
  require_utf8(o.value, "--set", o.key);
  YAML::Node cur;
  cur.reset(root);
  std::vector<std::string> parts;
  std::stringstream ss(o.key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  std::string path;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty())
      throw InputError(fmt::format("empty part in key '{}'", o.key),
                       "a dotted path such as strategy.stages.0.replicas", "", {"--set"});
    path = child_path(path, part);
    const bool last = i + 1 == parts.size();
    if (cur.IsSequence()) {
      size_t idx = 0;
      const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), idx);
      if (ec != std::errc() || ptr != part.data() + part.size() || idx >= cur.size()) {
        throw InputError(fmt::format("no list item '{}'", part),
                         fmt::format("an index from 0 to {}", cur.size() - 1), path, {"--set"});
      }
      YAML::Node next = cur[idx];
      if (last) {
        cur[idx] = YAML::Load(o.value);
        return;
      }
      cur.reset(next);
      continue;
    }
    if (cur.IsScalar()) {
      const std::string preset = cur.Scalar();
      cur = YAML::Node(YAML::NodeType::Map);
      cur["preset"] = preset;
    } else if (!cur.IsMap()) {
      cur = YAML::Node(YAML::NodeType::Map);
    }
    if (last) {
      cur[part] = YAML::Load(o.value);
      return;
    }
    YAML::Node next = cur[part];
    cur.reset(next);
  }
}

}  // namespace internal

Override parse_override(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(fmt::format("'{}' is not KEY=VALUE", text),
                     "e.g. --set cluster.inter_node.bandwidth=\"10 GB/s\"", "", {"--set"});
  }
  return {text.substr(0, eq), text.substr(eq + 1)};
}

}  // namespace pipesim
