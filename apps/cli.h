// The pipesim command line (SPEC section 1), callable in-process so tests can check
// messages and exit codes without spawning processes.
#pragma once

#include <ostream>

namespace pipesim {

// Exit codes: 0 success, 1 a problem the user asked to be told about (out of memory),
// 2 bad input, 3 internal error. Every non-zero exit first writes one line
// "pipesim: error: ..." to `err`.
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace pipesim
