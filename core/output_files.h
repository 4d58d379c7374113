// A command's output files, written all or nothing (SPEC section 1: never a partial output
// left behind as if complete).
//
// Each file is first written under a fresh random name in its destination's directory,
// created exclusively and never through a symlink (O_CREAT | O_EXCL | O_NOFOLLOW), then
// flushed to disk. Only when every output of the command is complete are they renamed into
// place; on any error every temporary is removed and no destination is touched. Renaming
// replaces a symlink at the destination, never the file it points to.
//
// A destination that exists and is a character device or a FIFO (/dev/null, /dev/stdout,
// a pipe) is written directly, without creating or replacing anything, after the regular
// outputs are complete and before they are renamed. Any other existing non-regular file (a
// directory, a socket, a block device) is refused, as is an output that is one of the
// command's inputs, the same path given twice and an empty path.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/input_file.h"

namespace pipesim {

class OutputFiles {
 public:
  using Body = std::function<void(std::ostream&)>;

  // `inputs`: the files the command read, which no output may replace.
  explicit OutputFiles(std::vector<InputIdentity> inputs = {});

  // Registers the output of `option` (e.g. "--json") at `path`; checks the path now.
  // Throws InputError.
  void add(const std::string& option, const std::string& path, Body body);

  // Writes every output, then moves them into place. Throws InputError (nothing left
  // behind) on any failure. Each registered output is written once.
  void commit();

  // Whether no output is registered.
  bool empty() const { return outputs_.empty(); }

 private:
  struct Output {
    std::string option, path;
    Body body;
  };
  std::vector<InputIdentity> inputs_;
  std::vector<Output> outputs_;
};

// Throws InputError when `out` (standard output) failed to take what was written to it.
void check_stdout(std::ostream& out);

}  // namespace pipesim
