// Transparent huge pages for large per-op arrays.
#pragma once

#include <cstddef>
#include <vector>

namespace pipesim {

// Asks the kernel to back the whole pages of [data, data + bytes) with transparent huge
// pages (Linux with THP in "madvise" mode; nothing elsewhere, nor below 4 MiB). Per-op
// arrays of graphs with millions of ops are first touched in a burst and then read in
// scattered order; huge pages cost one page fault and one TLB entry per 2 MiB instead of
// per 4 KiB. Call it before the range is first written.
void advise_huge_pages(void* data, size_t bytes);
// v.reserve(n), then the advice above on the buffer (while its pages are still untouched).
template <class T>
void reserve_huge(std::vector<T>& v, size_t n) {
  v.reserve(n);
  advise_huge_pages(v.data(), v.capacity() * sizeof(T));
}

}  // namespace pipesim
