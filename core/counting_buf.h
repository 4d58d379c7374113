// An output buffer that counts what it is given and keeps none of it: a writer's cost
// without the disk (benchmarks, fuzzers).
#pragma once

#include <cstddef>
#include <streambuf>

namespace pipesim {

class CountingBuf : public std::streambuf {
 public:
  size_t size = 0;

 protected:
  std::streamsize xsputn(const char*, std::streamsize n) override {
    size += static_cast<size_t>(n);
    return n;
  }
  int_type overflow(int_type c) override {
    ++size;
    return traits_type::not_eof(c);
  }
};

}  // namespace pipesim
