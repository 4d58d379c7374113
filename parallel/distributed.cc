#include "parallel/distributed.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "core/error.h"

#ifdef PIPESIM_HAVE_MPI
// The C API only: the deprecated C++ bindings are neither used nor needed at link time.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace pipesim {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  const int n = std::atoi(v);
  return n > 0 ? n : fallback;
}

bool started_by_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

bool mpi_running() {
#ifdef PIPESIM_HAVE_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
#else
  return false;
#endif
}

// A fixed permutation of 0..n-1 (Fisher-Yates driven by splitmix64), the same in every
// rank of one binary.
std::vector<size_t> permutation(size_t n) {
  std::vector<size_t> p(n);
  std::iota(p.begin(), p.end(), size_t{0});
  uint64_t state = 0x9e3779b97f4a7c15ull ^ n;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (size_t i = n; i > 1; --i) std::swap(p[i - 1], p[next() % i]);
  return p;
}

// Runs `mine` on the threads; returns the first exception any item threw (the rest of the
// items are then skipped).
std::exception_ptr run_threads(const DistributedFor& w, const std::vector<size_t>& mine) {
  std::atomic<size_t> next{0};
  std::mutex lock;
  size_t done = 0;
  std::exception_ptr failure;
  auto worker = [&] {
    for (size_t k; (k = next++) < mine.size();) {
      try {
        w.run(mine[k]);
      } catch (...) {
        const std::lock_guard<std::mutex> g(lock);
        if (!failure) failure = std::current_exception();
        next = mine.size();
        return;
      }
      const std::lock_guard<std::mutex> g(lock);
      ++done;
      if (w.progress) w.progress(done, mine.size());
    }
  };
  const unsigned threads = worker_threads(w.threads, mine.size());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return failure;
}

#ifdef PIPESIM_HAVE_MPI
void put_u64(std::string& buf, uint64_t v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  buf.append(b, sizeof v);
}

uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Every rank's results to every rank: (item, length, bytes) records, all-gathered.
void exchange(const DistributedFor& w, const std::vector<size_t>& mine, const JobRanks& job) {
  std::string buf;
  for (size_t i : mine) {
    const std::string bytes = w.save(i);
    put_u64(buf, i);
    put_u64(buf, bytes.size());
    buf += bytes;
  }
  const auto ranks = static_cast<size_t>(job.size);
  int64_t mine_bytes = static_cast<int64_t>(buf.size());
  std::vector<int64_t> sizes(ranks);
  MPI_Allgather(&mine_bytes, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  if (total > std::numeric_limits<int>::max())
    throw InputError(fmt::format("the results of all ranks take {} bytes", total),
                     "at most 2 GiB in one MPI job; split the sweep", "", {"mpirun"});
  std::vector<int> counts(ranks), offsets(ranks);
  for (size_t r = 0, at = 0; r < ranks; at += static_cast<size_t>(sizes[r]), ++r) {
    counts[r] = static_cast<int>(sizes[r]);
    offsets[r] = static_cast<int>(at);
  }
  std::vector<char> all(static_cast<size_t>(std::max<int64_t>(total, 1)));
  MPI_Allgatherv(buf.data(), static_cast<int>(buf.size()), MPI_BYTE, all.data(), counts.data(),
                 offsets.data(), MPI_BYTE, MPI_COMM_WORLD);
  for (size_t r = 0; r < ranks; ++r) {
    if (static_cast<int>(r) == job.rank) continue;
    const char* p = all.data() + offsets[r];
    const char* end = p + counts[r];
    while (p < end) {
      const size_t item = get_u64(p);
      const size_t len = get_u64(p + 8);
      w.load(item, std::string_view(p + 16, len));
      p += 16 + len;
    }
  }
}
#endif

}  // namespace

bool built_with_mpi() {
#ifdef PIPESIM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

JobRanks job_ranks() {
  JobRanks j;
#ifdef PIPESIM_HAVE_MPI
  if (mpi_running()) {
    MPI_Comm_rank(MPI_COMM_WORLD, &j.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &j.size);
    j.local_size =
        std::min(j.size, env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", j.size)));
  }
#endif
  return j;
}

MpiSession::MpiSession([[maybe_unused]] int* argc, [[maybe_unused]] char*** argv) {
#ifdef PIPESIM_HAVE_MPI
  if (!started_by_launcher() || mpi_running()) return;
  int provided = 0;
  // Only the main thread calls MPI (workers compute, the main thread exchanges).
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  active_ = true;
#endif
}

MpiSession::~MpiSession() {
#ifdef PIPESIM_HAVE_MPI
  if (active_) MPI_Finalize();
#endif
}

bool from_rank0(bool value) {
#ifdef PIPESIM_HAVE_MPI
  if (job_ranks().size > 1) {
    int v = value ? 1 : 0;
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v != 0;
  }
#endif
  return value;
}

unsigned worker_threads(int requested, size_t items) {
  unsigned t = 0;
  if (requested > 0) {
    t = static_cast<unsigned>(requested);
  } else {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    t = std::max(1u, cores / static_cast<unsigned>(std::max(1, job_ranks().local_size)));
  }
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(t, items)));
}

void distributed_for(const DistributedFor& w) {
  const JobRanks job = job_ranks();
  std::vector<size_t> mine;
  if (job.size == 1) {
    mine.resize(w.count);
    std::iota(mine.begin(), mine.end(), size_t{0});
  } else {
    const std::vector<size_t> order = permutation(w.count);
    for (size_t k = static_cast<size_t>(job.rank); k < order.size();
         k += static_cast<size_t>(job.size))
      mine.push_back(order[k]);
  }
  std::exception_ptr failure = run_threads(w, mine);
#ifdef PIPESIM_HAVE_MPI
  if (job.size > 1) {
    // Agree on failure first, so that no rank waits for results that will never come.
    int failed = failure ? job.rank : job.size, first_failed = job.size;
    MPI_Allreduce(&failed, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (failure) std::rethrow_exception(failure);
    if (first_failed < job.size)
      throw InternalError(fmt::format("rank {} of the MPI job failed", first_failed));
    exchange(w, mine, job);
    return;
  }
#endif
  if (failure) std::rethrow_exception(failure);
}

}  // namespace pipesim
