#include "experiments/cli/command.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

#include "sim/core/format.h"

namespace servesim::experiments {

static std::map<std::string, Command>& command_table() {
  static std::map<std::string, Command> table;
  return table;
}

bool register_command(Command command) {
  std::string name = command.name;
  command_table()[name] = std::move(command);
  return true;
}

std::vector<const Command*> commands() {
  std::vector<const Command*> out;
  for (const auto& [name, c] : command_table()) out.push_back(&c);
  return out;
}

boost::program_options::variables_map parse_options(const std::vector<std::string>& args,
                                                    const boost::program_options::options_description& options,
                                                    const char* positional, int max_positional) {
  namespace po = boost::program_options;
  po::positional_options_description pos;
  if (positional) pos.add(positional, max_positional);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).positional(pos).run(), vm);
  po::notify(vm);
  return vm;
}

void require_option(const std::string& option, double value, double lo, double hi, const std::string& what,
                    bool lo_exclusive) {
  const bool low = lo_exclusive ? !(value > lo) : !(value >= lo);
  if (!std::isfinite(value) || low || !(value <= hi))
    throw UsageError(option + " " + core::format_double(value) + ": valid: " + (lo_exclusive ? "(" : "[") +
                     core::format_double(lo) + ", " + core::format_double(hi) + "] (" + what + ")");
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string grouped(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string percent(double fraction) { return fixed(fraction * 100.0, 1) + "%"; }

}  // namespace servesim::experiments
