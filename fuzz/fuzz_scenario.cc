// A scenario file: load (every section reader and validation rule) -> build -> simulate ->
// every report writer.
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pipesim::fuzz::expect_result_or_input_error(
      [&] { pipesim::fuzz::simulate_and_report(pipesim::load_scenario_text(text, "fuzz.yaml")); });
  return 0;
}
