// Where a check on a scenario's values points its error: for a section read from YAML, the
// node at a dotted path of the document (or --set for an overridden key); for values built
// in code, no place: the error names the key alone. Not part of the public interface.
#pragma once

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <map>
#include <string>
#include <utility>

#include "core/error.h"
#include "scenario/internal/reader.h"

namespace pipesim::internal {

class Locator {
 public:
  Locator() = default;  // values built in code
  // `roots` maps a path's first component ("strategy", "training") to its section's node.
  Locator(const Reader& r, std::map<std::string, YAML::Node> roots)
      : reader_(&r), roots_(std::move(roots)) {}

  // The node at `path` ("strategy.stages.2.tensor"), undefined when absent or in code.
  YAML::Node node(const std::string& path) const {
    if (reader_ == nullptr) return undefined();
    const size_t dot = path.find('.');
    const auto root = roots_.find(path.substr(0, dot));
    if (root == roots_.end()) return undefined();
    return walk(root->second, dot == std::string::npos ? "" : path.substr(dot + 1));
  }
  // Whether the document gives `path` (false for values built in code).
  bool given(const std::string& path) const { return node(path).IsDefined(); }

  // The error of key `key` at the node of `node_path` (the key's own node when empty).
  [[noreturn]] void fail_at(const std::string& node_path, const std::string& key, std::string what,
                            std::string allowed = {}) const {
    if (reader_ == nullptr) throw InputError(std::move(what), std::move(allowed), key);
    reader_->fail(node(node_path.empty() ? key : node_path), key, std::move(what),
                  std::move(allowed));
  }
  [[noreturn]] void fail(const std::string& key, std::string what, std::string allowed = {}) const {
    fail_at(key, key, std::move(what), std::move(allowed));
  }
  Location where(const std::string& node_path, const std::string& key) const {
    return reader_ == nullptr ? Location{} : reader_->where(node(node_path), key);
  }

 private:
  // What a missing key gives: a node that is not defined (yaml-cpp's "zombie").
  static YAML::Node undefined() {
    const YAML::Node map(YAML::NodeType::Map);
    return map["-"];
  }
  // `n` followed along the dotted `rest` (list items by index).
  static YAML::Node walk(const YAML::Node& n, const std::string& rest) {
    if (rest.empty() || !n.IsDefined()) return n;
    const size_t dot = rest.find('.');
    const std::string part = rest.substr(0, dot);
    const std::string next = dot == std::string::npos ? "" : rest.substr(dot + 1);
    if (n.IsSequence()) {
      size_t index = 0;
      const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
      if (ec != std::errc() || ptr != part.data() + part.size() || index >= n.size())
        return undefined();
      return walk(n[index], next);
    }
    if (n.IsMap()) return walk(n[part], next);
    return undefined();
  }
  const Reader* reader_ = nullptr;
  std::map<std::string, YAML::Node> roots_;
};

}  // namespace pipesim::internal
