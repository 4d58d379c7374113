// Reading the files a scenario names (the scenario, included models, profiles) so that no
// input can hang, exhaust memory or be something other than a file: only regular files,
// at most kMaxInputBytes, opened without blocking (a FIFO is refused, not waited on).
//
// Every file read is recorded in the calling thread's InputLog, if one is active, so the
// command line can refuse to write an output over one of its own inputs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace pipesim {

inline constexpr int64_t kMaxInputBytes = int64_t{64} << 20;  // 64 MiB

// The file's whole contents. Throws InputError if it cannot be opened, is not a regular
// file, is larger than kMaxInputBytes or is not valid UTF-8 (then at the line and column of
// the first bad byte). `what` names the file in messages ("the scenario file"), `allowed`
// says what is expected; the error is at `where`, or at the path itself when that is empty.
// Messages never quote the file's content.
std::string read_input_file(const std::string& path, const std::string& what,
                            const std::string& allowed, const std::string& key = {},
                            Location where = {});

// The identity of one file read (device and inode), and its path for messages.
struct InputIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  std::string path;
};

// Records every file read_input_file reads on this thread while it lives.
class InputLog {
 public:
  InputLog();
  ~InputLog();
  InputLog(const InputLog&) = delete;
  InputLog& operator=(const InputLog&) = delete;

  const std::vector<InputIdentity>& files() const { return files_; }
  void add(InputIdentity f) { files_.push_back(std::move(f)); }

 private:
  std::vector<InputIdentity> files_;
  InputLog* outer_;
};

// Offset of the first byte that does not belong to well-formed UTF-8 (no overlong forms,
// no surrogates, nothing above U+10FFFF); npos when the whole text is valid.
size_t invalid_utf8_offset(std::string_view text);
// 1-based line and column of a byte offset.
std::pair<int, int> line_column(std::string_view text, size_t offset);
// Throws InputError at `file`:line:col when `text` is not valid UTF-8.
void require_utf8(std::string_view text, const std::string& file, const std::string& key = {});
// The text with every invalid byte replaced by '?', for names taken from paths.
std::string lossy_utf8(std::string_view text);

}  // namespace pipesim
