#include "core/pod_array.h"

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

// A block's pages: whole pages, so that the huge-page advice covers the whole mapping (a
// mapping advised in part is two, which mremap refuses to move as one).
size_t mapped(size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

void* map_block(size_t bytes) {
  void* p =
      mmap(nullptr, mapped(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
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
    void* p = mremap(block, mapped(old_bytes), mapped(bytes), MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throw std::bad_alloc();
    advise_huge_pages(p, mapped(bytes));
    return p;
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

void free_pod_block(void* block, size_t bytes) {
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
