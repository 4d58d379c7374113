#include "core/output_files.h"

#include "core/interrupt_guard.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <streambuf>

namespace pipesim {
namespace {

// An output stream buffer over a file descriptor that remembers the first write error.
class FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd), buf_(size_t{1} << 16) {
    setp(buf_.data(), buf_.data() + buf_.size());
  }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* p = pbase();
    while (p < pptr() && error_ == 0) {
      const ssize_t n = ::write(fd_, p, static_cast<size_t>(pptr() - p));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = n < 0 ? errno : EIO;
        break;
      }
      p += n;
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return error_ == 0;
  }
  int fd_;
  std::vector<char> buf_;
  int error_ = 0;
};

[[noreturn]] void fail(const std::string& path, std::string what, int err = 0) {
  if (err != 0) what += fmt::format(": {}", std::strerror(err));
  throw InputError(std::move(what), "a writable path", "", {path});
}

// Writes `body` to the open descriptor and closes it; returns the first error (0 if none).
int write_all(int fd, const OutputFiles::Body& body, bool to_disk) {
  int err = 0;
  {
    FdBuf buf(fd);
    std::ostream os(&buf);
    body(os);
    os.flush();
    err = buf.error();
    if (err == 0 && !os) err = EIO;
  }
  if (err == 0 && to_disk && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}() ^
                                          (static_cast<uint64_t>(::getpid()) << 32)};
  return fmt::format("{:016x}", rng());
}

std::string absolute_normal(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
  return ec ? path : p.string();
}

}  // namespace

OutputFiles::OutputFiles(std::vector<InputIdentity> inputs) : inputs_(std::move(inputs)) {}

void OutputFiles::add(const std::string& option, const std::string& path, Body body) {
  if (path.empty())
    throw InputError("the output path is empty", "a file path", option, {"<command line>"});
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    for (const InputIdentity& in : inputs_) {
      if (in.device == st.st_dev && in.inode == st.st_ino)
        throw InputError(fmt::format("the output would overwrite the input '{}'", in.path),
                         "an output path that is not one of the inputs", option, {path});
    }
    if (S_ISDIR(st.st_mode))
      throw InputError("the output path is a directory", "a file path", option, {path});
    if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
      throw InputError("the output path exists and is not a regular file",
                       "a regular file, a character device or a FIFO", option, {path});
  }
  // The directory must take a new file (commit() creates one beside the destination): a
  // missing or read-only directory is reported now, before any work the output waits for.
  if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    const std::filesystem::path p(path);
    const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      fail(path, "cannot create the output file", errno);
  }
  const std::string key = absolute_normal(path);
  for (const Output& o : outputs_) {
    if (S_ISCHR(st.st_mode)) break;  // /dev/null may take several outputs
    if (absolute_normal(o.path) == key)
      throw InputError(fmt::format("the same file is also given to {}", o.option),
                       "a different path for each output", option, {path});
  }
  outputs_.push_back({option, path, std::move(body)});
}

void OutputFiles::commit() {
  struct Staged {
    const Output* out;
    std::string tmp;  // empty: written directly to a device or FIFO
  };
  std::vector<Staged> staged;
  InterruptGuard guard;  // a signal while writing removes the temporaries
  auto discard = [&] {
    for (const Staged& s : staged)
      if (!s.tmp.empty()) ::unlink(s.tmp.c_str());
  };
  try {
    for (const Output& o : outputs_) {
      struct stat st {};
      if (::stat(o.path.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
        staged.push_back({&o, {}});
        continue;
      }
      const std::filesystem::path p(o.path);
      const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
      int fd = -1;
      std::string tmp;
      for (int attempt = 0; fd < 0; ++attempt) {
        tmp = (dir / fmt::format(".{}.{}.tmp", p.filename().string(), random_suffix())).string();
        const InterruptGuard::Hold hold;  // created and registered as one step
        fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && (errno != EEXIST || attempt == 100))
          fail(o.path, "cannot create the output file", errno);
        if (fd >= 0) guard.add(tmp);
      }
      staged.push_back({&o, tmp});
      if (const int err = write_all(fd, o.body, true); err != 0)
        fail(o.path, "writing the output file failed", err);
    }
    // Devices and FIFOs last: nothing of theirs can be taken back.
    for (const Staged& s : staged) {
      if (!s.tmp.empty()) continue;
      // O_NONBLOCK: a FIFO with no reader is an error, not a hang.
      const int fd = ::open(s.out->path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
      if (fd < 0) fail(s.out->path, "cannot open the output", errno);
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      if (const int err = write_all(fd, s.out->body, false); err != 0)
        fail(s.out->path, "writing the output failed", err);
    }
  } catch (...) {
    discard();
    throw;
  }
  const InterruptGuard::Hold hold;  // every output moves into place, or none
  guard.clear();
  for (size_t i = 0; i < staged.size(); ++i) {
    if (staged[i].tmp.empty()) continue;
    if (::rename(staged[i].tmp.c_str(), staged[i].out->path.c_str()) != 0) {
      const int err = errno;
      for (size_t k = i; k < staged.size(); ++k)
        if (!staged[k].tmp.empty()) ::unlink(staged[k].tmp.c_str());
      fail(staged[i].out->path, "cannot move the output into place", err);
    }
  }
  outputs_.clear();
}

void check_stdout(std::ostream& out) {
  errno = 0;
  out.flush();
  if (out) return;
  const int err = errno;
  throw InputError(err != 0
                       ? fmt::format("writing to standard output failed: {}", std::strerror(err))
                       : "writing to standard output failed",
                   "a writable standard output", "", {"<stdout>"});
}

}  // namespace pipesim
