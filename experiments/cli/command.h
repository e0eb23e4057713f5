#pragma once
// Sub-commands of the servesim command line. Each lives in its own .cc and registers itself:
//   const bool kRegistered = register_command({"run", "CONFIG.toml [options]", "simulate ...", run});
// so that commands added by different work do not meet in one file.

#include <boost/program_options.hpp>

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/core/error.h"

namespace servesim::experiments {

// A usage problem (unknown flag, missing argument): exit code 2, like a configuration error.
using UsageError = core::UsageError;

struct Command {
  std::string name;      // "run"
  std::string synopsis;  // "CONFIG.toml [--set k=v ...] [--db FILE] ..."
  std::string summary;   // one or two lines for servesim --help
  // Arguments after the command name; returns the exit code.
  std::function<int(const std::vector<std::string>& args, std::ostream& out, std::ostream& err)> run;
};

bool register_command(Command command);

// Parses a command's arguments against `options` and notifies the bound variables; bare arguments
// go to the option named `positional` (at most `max_positional` of them, -1 = any), or are an
// error when it is null. Boost's errors propagate (the command line turns them into usage errors).
boost::program_options::variables_map parse_options(const std::vector<std::string>& args,
                                                    const boost::program_options::options_description& options,
                                                    const char* positional = nullptr, int max_positional = 1);
// Registered commands, sorted by name.
std::vector<const Command*> commands();

// Refuses (UsageError) a numeric option that is not finite or outside [lo, hi] (or (lo, hi] when
// `lo_exclusive`): "--target 1.5: valid: (0, 1] (SLO attainment to sustain, a fraction)".
void require_option(const std::string& option, double value, double lo, double hi, const std::string& what,
                    bool lo_exclusive = false);

// Formatting shared by commands' human-readable output.
std::string fixed(double v, int digits);       // fixed-point, `digits` decimals
std::string grouped(uint64_t v);               // 1,234,567
std::string percent(double fraction);          // 0.123 -> "12.3%"

}  // namespace servesim::experiments
