#include "core/pod_array.h"

#include <cstdint>
#include <cstdlib>

#include "core/huge_pages.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace pipesim {

namespace {

#if defined(__linux__) && defined(MREMAP_MAYMOVE)
bool own_pages(size_t bytes) {
  return bytes >= kPodPagesFrom;
}

// A block's pages: whole huge pages (2 MiB) at an address aligned to them, so that the
// huge-page advice covers the whole mapping (a mapping advised in part is two, which
// mremap refuses to move as one) and a move keeps every huge page whole (moved to an
// address of another alignment, each would be split into 4 KiB pages, and the scattered
// reads of ops would miss the TLB again).
constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
size_t mapped(size_t bytes) {
  return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}

// `bytes` (whole huge pages) of address space at a huge-page boundary, inaccessible: the
// place a block is mapped or moved to.
void* aligned_range(size_t bytes) {
  void* p = mmap(nullptr, bytes + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t at = (base + kHugePage - 1) & ~(kHugePage - 1);
  if (at > base) munmap(p, at - base);
  if (const uintptr_t tail = base + bytes + kHugePage - (at + bytes); tail > 0)
    munmap(reinterpret_cast<void*>(at + bytes), tail);
  return reinterpret_cast<void*>(at);
}

void* map_block(size_t bytes) {
  void* at = aligned_range(mapped(bytes));
  void* p = mmap(at, mapped(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                 -1, 0);
  if (p == MAP_FAILED) {
    munmap(at, mapped(bytes));
    throw std::bad_alloc();
  }
  advise_huge_pages(p, mapped(bytes));
  return p;
}

// The block's pages, grown to `bytes` where they are, else moved to an aligned range.
void* remap_block(void* block, size_t old_bytes, size_t bytes) {
  void* p = mremap(block, mapped(old_bytes), mapped(bytes), 0);
  if (p == MAP_FAILED) {
    void* at = aligned_range(mapped(bytes));
    p = mremap(block, mapped(old_bytes), mapped(bytes), MREMAP_MAYMOVE | MREMAP_FIXED, at);
    if (p == MAP_FAILED) {
      munmap(at, mapped(bytes));
      throw std::bad_alloc();
    }
  }
  advise_huge_pages(p, mapped(bytes));
  return p;
}
#else
bool own_pages(size_t) {
  return false;
}
void* map_block(size_t) {
  throw std::bad_alloc();
}
#endif

}  // namespace

void* grow_pod_block(void* block, size_t old_bytes, size_t keep, size_t bytes) {
#if defined(__linux__) && defined(MREMAP_MAYMOVE)
  if (block != nullptr && own_pages(old_bytes)) {
    // The pages move to the new range as they are: nothing copied, nothing faulted again.
    return remap_block(block, old_bytes, bytes);
  }
#endif
  if (own_pages(bytes)) {
    void* p = map_block(bytes);
    if (keep > 0) std::memcpy(p, block, keep);
    free_pod_block(block, old_bytes);
    return p;
  }
  void* p = std::realloc(block, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void free_pod_block(void* block, [[maybe_unused]] size_t bytes) {
  if (block == nullptr) return;
#if defined(__linux__) && defined(MREMAP_MAYMOVE)
  if (own_pages(bytes)) {
    munmap(block, mapped(bytes));
    return;
  }
#endif
  std::free(block);
}

}  // namespace pipesim
