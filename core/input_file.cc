#include "core/input_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pipesim {
namespace {

thread_local InputLog* current_log = nullptr;

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

InputLog::InputLog() : outer_(current_log) {
  current_log = this;
}
InputLog::~InputLog() {
  current_log = outer_;
}

std::string read_input_file(const std::string& path, const std::string& what,
                            const std::string& allowed, const std::string& key, Location where) {
  // Name the path in the message only when the error is located elsewhere.
  const std::string name = where.file.empty() ? what : fmt::format("{} '{}'", what, path);
  if (where.file.empty()) where = {path, 0, 0};
  auto fail = [&](std::string problem, std::string expected) {
    throw InputError(std::move(problem), std::move(expected), key, where);
  };
  // A path with a NUL in it (from Python, say) would be read only up to the NUL.
  if (path.find('\0') != std::string::npos)
    fail(fmt::format("the path of {} contains a NUL character", what),
         "a path without NUL characters");
  // O_NONBLOCK: opening a FIFO with no writer must not wait; it is refused below.
  const Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0 && errno == ENOENT)
    throw MissingFile(path, fmt::format("cannot read {}: {}", name, std::strerror(errno)), allowed,
                      key, where);
  if (f.fd < 0) fail(fmt::format("cannot read {}: {}", name, std::strerror(errno)), allowed);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0)
    fail(fmt::format("cannot read {}: {}", name, std::strerror(errno)), allowed);
  if (!S_ISREG(st.st_mode))
    fail(fmt::format("{} is {}", name, file_kind(st.st_mode)), "a regular file");
  const std::string limit = fmt::format("at most {} MiB", kMaxInputBytes >> 20);
  if (st.st_size > kMaxInputBytes)
    fail(fmt::format("{} is {:.1f} MiB, too large to read", name,
                     static_cast<double>(st.st_size) / (1 << 20)),
         limit);
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t have = 0;
  for (;;) {
    if (have == text.size()) {
      // The file may have grown since fstat: read on, up to the limit.
      if (static_cast<int64_t>(have) > kMaxInputBytes)
        fail(fmt::format("{} is larger than {} MiB", name, kMaxInputBytes >> 20), limit);
      text.resize(std::max<size_t>(4096, text.size() * 2));
    }
    const ssize_t n = ::read(f.fd, text.data() + have, text.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(fmt::format("cannot read {}: {}", name, std::strerror(errno)), allowed);
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  text.resize(have);
  if (static_cast<int64_t>(have) > kMaxInputBytes)
    fail(fmt::format("{} is larger than {} MiB", name, kMaxInputBytes >> 20), limit);
  require_utf8(text, path, key);
  if (current_log != nullptr) current_log->add({st.st_dev, st.st_ino, path});
  return text;
}

size_t invalid_utf8_offset(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::pair<int, int> line_column(std::string_view text, size_t offset) {
  int line = 1;
  size_t start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      start = i + 1;
    }
  }
  return {line, static_cast<int>(offset - start) + 1};
}

void require_utf8(std::string_view text, const std::string& file, const std::string& key) {
  const size_t bad = invalid_utf8_offset(text);
  if (bad == std::string_view::npos) return;
  const auto [line, column] = line_column(text, bad);
  throw InputError(
      fmt::format("invalid UTF-8 (byte 0x{:02x})", static_cast<unsigned char>(text[bad])),
      "UTF-8 text", key, {file, line, column});
}

std::string lossy_utf8(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    const size_t bad = invalid_utf8_offset(text);
    if (bad == std::string_view::npos) {
      out += text;
      break;
    }
    out += text.substr(0, bad);
    out += '?';
    text.remove_prefix(bad + 1);
  }
  return out;
}

}  // namespace pipesim
