// JSON text for output. A string the user gave (a scenario's name, an override's value) may
// hold bytes that are not UTF-8; nlohmann's dump() throws on them, so every report, plan and
// trace is written with them replaced by U+FFFD instead.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace pipesim {

template <typename Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::detail::error_handler_t::replace);
}

}  // namespace pipesim
