// User errors versus our bugs.
//
// Bad input (a file, a key, a unit, a value) is the user's to fix: it throws InputError,
// which carries where it came from and what is allowed, and the CLI turns it into one line
// and exit code 2. Our own broken invariants are assertions (PIPESIM_ASSERT), checked in
// every build type because a wrong simulation result is worse than no result; they throw
// InternalError, which the CLI reports as one line and exit code 3.
#pragma once

#include <stdexcept>
#include <string>

namespace pipesim {

struct Location {
  std::string file;  // empty when the value did not come from a file
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;    // 1-based; 0 when unknown
};

class InputError : public std::runtime_error {
 public:
  InputError(std::string what, std::string allowed = {}, std::string key = {}, Location where = {});

  const std::string& problem() const { return problem_; }
  const std::string& allowed() const { return allowed_; }
  const std::string& key() const { return key_; }
  const Location& where() const { return where_; }

  // Fills in context an inner parser did not know; keeps what is already set.
  void set_key_if_empty(const std::string& key);
  void set_location_if_empty(const Location& where);

  // "<file>:<line>:<col>: <key>: <what> (<allowed>)", omitting parts that are unknown.
  std::string message() const;

 private:
  void refresh();
  std::string problem_;
  std::string allowed_;
  std::string key_;
  Location where_;
  std::string message_;
};

// An input file that does not exist (ENOENT): an InputError like any other on the command
// line; Python raises FileNotFoundError for it.
class MissingFile : public InputError {
 public:
  MissingFile(std::string path, std::string what, std::string allowed, std::string key,
              Location where)
      : InputError(std::move(what), std::move(allowed), std::move(key), std::move(where)),
        path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Something the simulation found that the user asked to be told about (exit code 1).
class SimulationProblem : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A broken invariant of our own (exit code 3).
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line, const char* msg);

}  // namespace pipesim

#define PIPESIM_ASSERT(expr, msg) \
  ((expr) ? static_cast<void>(0) : ::pipesim::assertion_failed(#expr, __FILE__, __LINE__, msg))
