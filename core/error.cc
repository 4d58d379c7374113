#include "core/error.h"

#include <fmt/format.h>

#include "core/checked.h"

namespace pipesim {

InputError::InputError(std::string what, std::string allowed, std::string key, Location where)
    : std::runtime_error(what),
      problem_(std::move(what)),
      allowed_(std::move(allowed)),
      key_(std::move(key)),
      where_(std::move(where)) {
  refresh();
}

void InputError::set_key_if_empty(const std::string& key) {
  if (key_.empty()) key_ = key;
  refresh();
}

void InputError::set_location_if_empty(const Location& where) {
  if (where_.file.empty() && where_.line == 0) where_ = where;
  refresh();
}

std::string InputError::message() const {
  return message_;
}

void InputError::refresh() {
  std::string out;
  if (!where_.file.empty()) {
    out += where_.file;
    if (where_.line > 0) out += fmt::format(":{}:{}", where_.line, where_.column);
    out += ": ";
  }
  if (!key_.empty()) out += key_ + ": ";
  out += problem_;
  if (!allowed_.empty()) out += fmt::format(" ({})", allowed_);
  // One line whatever the input held: control characters are written as escapes.
  message_.clear();
  for (const char c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      message_ += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      message_ += c;
    }
  }
}

void too_large(std::string_view what) {
  throw InputError(fmt::format("{} is too large to simulate", what),
                   "totals below 9.2e18 bytes, parameters or picoseconds (106 days)");
}

void time_overflow() {
  too_large("a time");
}

void assertion_failed(const char* expr, const char* file, int line, const char* msg) {
  throw InternalError(fmt::format("{}:{}: assertion '{}' failed: {}", file, line, expr, msg));
}

}  // namespace pipesim
