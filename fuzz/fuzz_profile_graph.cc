// A measured profile (model: {profile: F}) in its graph form, read on its own and then as
// the model of a small scenario that is simulated and reported.
#include "fuzz/harness.h"
#include "scenario/internal/sections.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pipesim::fuzz::fuzz_profile(data, size, [](std::istream& in, const std::string& file) {
    return pipesim::internal::read_profile_graph(in, file);
  });
  return 0;
}
