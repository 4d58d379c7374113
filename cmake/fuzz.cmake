# PIPESIM_FUZZ: the whole tree is compiled by clang with libFuzzer's coverage
# (-fsanitize=fuzzer-no-link) on top of the sanitizers; fuzz/ links the targets.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "PIPESIM_FUZZ needs clang (-fsanitize=fuzzer); configure with "
                      "-DCMAKE_CXX_COMPILER=clang++")
endif()
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer")
check_cxx_source_compiles(
  "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }"
  PIPESIM_HAS_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)
if(NOT PIPESIM_HAS_LIBFUZZER)
  message(FATAL_ERROR "clang cannot link -fsanitize=fuzzer (Debian: apt-get install libclang-rt-dev)")
endif()
add_compile_options(-fsanitize=fuzzer-no-link)
