#pragma once
// The servesim command line. main() is a one-line call of run_cli, so tests can drive the commands
// in-process as well as through the binary.

#include <iosfwd>

namespace servesim::experiments {

// Returns the process exit code: 0 on success, 1 on a run-time error, 2 on a usage or
// configuration error. Errors are printed to `err` as one paragraph.
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace servesim::experiments
