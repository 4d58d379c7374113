// Work spread over every core of a machine, and over the ranks of an MPI job when pipesim
// is built with MPI and started by `mpirun`: the sweep's points and the planner's
// simulations.
//
// Items are shared among the ranks statically: each rank takes every K-th item of one
// fixed pseudo-random permutation of them, the same on every rank. No message is needed
// until the end (so only the main thread ever calls MPI and no rank waits for a
// coordinator), and the permutation keeps the ranks' shares alike in cost even when the
// cost grows along an axis of a grid (micro-batches, pipeline depth) or repeats with it.
// Inside a rank, threads take the next item of its share as they finish (dynamic), which
// absorbs the remaining unevenness. At the end every rank receives every result
// (all-gather), so all ranks hold the same outcome, reach the same exit code, and rank 0
// writes the outputs.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace pipesim {

// This process's place in the job: rank 0 of 1 unless an MpiSession is active.
struct JobRanks {
  int rank = 0;
  int size = 1;
  int local_size = 1;  // ranks on this machine (they share its cores)
};
JobRanks job_ranks();

// Whether pipesim was built with MPI.
bool built_with_mpi();

// Initialises MPI for the object's life when pipesim is built with MPI and the process was
// started by an MPI launcher (Open MPI, MPICH/Hydra, PMIx or Slurm set their variables in
// its environment); otherwise does nothing, so a plain run pays no MPI start-up. One per
// process, in main().
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  bool active() const { return active_; }

 private:
  bool active_ = false;
};

// Rank 0's `value` on every rank (collective: every rank of the job must call it); without
// MPI, `value`. For what only rank 0 checks, such as its output paths.
bool from_rank0(bool value);

// Worker threads for `items` items: `requested` if positive, else this machine's cores
// divided among its ranks; never more than the items, never fewer than one.
unsigned worker_threads(int requested, size_t items);

struct DistributedFor {
  size_t count = 0;  // items 0 .. count-1
  int threads = 0;   // per rank; 0: see worker_threads
  // Computes item i and keeps its result (called from several threads at once, never twice
  // for one item). An exception stops the work on every rank and is rethrown (on the other
  // ranks as an InternalError saying which rank failed).
  std::function<void(size_t)> run;
  // Under MPI only: item i's result as bytes, on the rank that ran it (main thread) ...
  std::function<std::string(size_t)> save;
  // ... and stored from those bytes on every other rank (main thread).
  std::function<void(size_t, std::string_view)> load;
  // After each item this rank finishes: items done here and items this rank has (called
  // under a lock, from the worker threads).
  std::function<void(size_t done, size_t here)> progress;
};

// Runs `work` to completion; afterwards every rank holds every item's result.
void distributed_for(const DistributedFor& work);

}  // namespace pipesim
