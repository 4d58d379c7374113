// A growable array of plain (trivially copyable) elements for the per-op arrays of graphs
// with millions of ops.
//
// std::vector grows by allocating a buffer twice as large, copying every element into it
// and freeing the old one: the op list of a 12 M-op graph (the 576-GPU Llama 3.1 405B run)
// touched 3 GB of fresh pages and copied 0.8 GB on its way to 0.8 GB. PodArray keeps a
// large array in pages of its own (grow_pod_block), whole huge pages at a huge-page
// boundary, and on Linux grows it by remapping those pages, in place or to a larger range
// at such a boundary (mremap): past its first MiB each element is written once, each page
// faulted in once, and every huge page stays whole. Small arrays, and large ones
// elsewhere, live on the heap and grow as std::vector does. (LeakSanitizer does not scan
// the mapped pages: elements holding the only pointer to heap memory would read as leaks.)
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

namespace pipesim {

// A block of `bytes` holding the first `keep` bytes of `block` (of `old_bytes`; null: none),
// which it frees or moves; from kPodPagesFrom bytes up, pages of its own (advised onto huge
// pages from 4 MiB, advise_huge_pages), the heap below. Throws std::bad_alloc.
constexpr size_t kPodPagesFrom = size_t{1} << 20;
void* grow_pod_block(void* block, size_t old_bytes, size_t keep, size_t bytes);
void free_pod_block(void* block, size_t bytes);

template <class T>
class PodArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "PodArray moves its elements as bytes");

 public:
  PodArray() = default;
  PodArray(const PodArray& o) { *this = o; }
  PodArray(PodArray&& o) noexcept { swap(o); }
  PodArray& operator=(const PodArray& o) {
    if (this != &o) {
      size_ = 0;
      reserve(o.size_);
      if (o.size_ > 0) std::memcpy(static_cast<void*>(data_), o.data_, o.size_ * sizeof(T));
      size_ = o.size_;
    }
    return *this;
  }
  PodArray& operator=(PodArray&& o) noexcept {
    PodArray tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~PodArray() { free_pod_block(data_, capacity_ * sizeof(T)); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  operator std::span<const T>() const { return {data_, size_}; }

  void push_back(const T& v) {
    if (size_ == capacity_) {
      const T copy = v;  // (v may be one of the elements the growth moves)
      reserve(std::max<size_t>(16, 2 * capacity_));
      data_[size_++] = copy;
      return;
    }
    data_[size_++] = v;
  }
  // Room for n elements (never shrinks).
  void reserve(size_t n) {
    if (n <= capacity_) return;
    if (n > std::numeric_limits<size_t>::max() / sizeof(T)) throw std::bad_alloc();
    data_ = static_cast<T*>(
        grow_pod_block(data_, capacity_ * sizeof(T), size_ * sizeof(T), n * sizeof(T)));
    capacity_ = n;
  }
  // n elements, the new ones value-initialised.
  void resize(size_t n) {
    reserve(n);
    if (n > size_) std::fill(data_ + size_, data_ + n, T{});
    size_ = n;
  }
  void clear() { size_ = 0; }
  void swap(PodArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace pipesim
