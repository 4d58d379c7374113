#include <iostream>
#include <streambuf>

#include "apps/cli.h"
#include "parallel/distributed.h"

namespace {
// Where the other ranks of an MPI job write: rank 0 speaks for the job.
class Discard : public std::streambuf {
  int overflow(int c) override { return c; }
};
}  // namespace

int main(int argc, char** argv) {
  const pipesim::MpiSession mpi(&argc, &argv);
  if (pipesim::job_ranks().rank != 0) {
    Discard discard;
    std::ostream quiet(&discard);
    return pipesim::run_cli(argc, argv, quiet, quiet);
  }
  return pipesim::run_cli(argc, argv, std::cout, std::cerr);
}
