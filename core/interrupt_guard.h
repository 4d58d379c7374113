// Temporary files that a SIGINT, SIGTERM or SIGHUP must not leave behind.
//
// While an InterruptGuard lives, those signals (unless ignored) first remove every file
// registered with it (unlink is async-signal-safe; the paths are copied into static
// storage beforehand), then act as before: with no handler of the program's own the
// process ends with 128 + the signal's number (130, 143, 129), as a shell reports a command
// the signal killed; an earlier handler (Python's, say) is called and the write that
// follows fails on the missing file. The previous actions come back when the guard ends.
// One guard lives at a time in the process; a second waits for the first to end.
#pragma once

#include <csignal>
#include <string>

namespace pipesim {

class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // Registers a file to remove on a signal (false when the fixed storage is full or the
  // path too long: the file is then only removed by the caller's own clean-up).
  bool add(const std::string& path);
  // Forgets every registered file (they have been renamed into place or removed).
  void clear();

  // Holds the signals back while it lives (the renames into place run as one step).
  class Hold {
   public:
    Hold();
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    sigset_t old_{};
  };
};

}  // namespace pipesim
