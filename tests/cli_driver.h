#pragma once
// Runs the servesim command line in-process, as main() would (experiments::run_cli), capturing its
// exit code, standard output and standard error.

#include <sstream>
#include <string>
#include <vector>

#include "experiments/cli/cli.h"

namespace servesim::testing {

struct Cli {
  int code = 0;
  std::string out, err;
};

// `args` without the program name: {"run", "x.toml", "--json"}.
inline Cli cli(std::vector<std::string> args) {
  args.insert(args.begin(), "servesim");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Cli r;
  r.code = experiments::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace servesim::testing
