#include "experiments/cli/cli.h"

#include <boost/program_options.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "experiments/cli/command.h"
#include "sim/core/error.h"
#include "sim/core/format.h"

namespace servesim::experiments {
namespace {

void usage(std::ostream& out) {
  out << "usage: servesim <command> [options]\n\ncommands:\n";
  for (const Command* c : commands()) {
    out << "  " << c->name << " " << c->synopsis << "\n";
    std::string line;
    for (char ch : c->summary + "\n") {
      if (ch == '\n') {
        out << "        " << line << "\n";
        line.clear();
      } else {
        line += ch;
      }
    }
  }
  out << "\noptions:\n"
         "  -h, --help     this help (servesim <command> --help for a command's options)\n"
         "  --version      print the version\n";
}

// A message as printed: one paragraph whatever the arguments it quotes held (a line break, a
// control character, an invisible one is shown escaped), and bounded.
std::string shown(const char* what) { return core::printable(what, 8000); }

// Boost's message of an option error. Its what() substitutes placeholders such as %value% in a loop
// that never ends when the substituted text holds a placeholder itself (`--%original_token%` hung):
// then the message is made here from the error's kind and option instead.
std::string boost_message(const boost::program_options::error_with_option_name& e, const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  bool placeholder = false;
  for (const auto& a : args)
    for (const char* token : {"%canonical_option%", "%option%", "%value%", "%original_token%", "%prefix%"})
      placeholder = placeholder || a.find(token) != std::string::npos;
  if (!placeholder) return e.what();
  const std::string option = core::printable(e.get_option_name(), 200);
  if (dynamic_cast<const po::unknown_option*>(&e)) return "unrecognised option '" + option + "'";
  if (dynamic_cast<const po::invalid_option_value*>(&e)) return "the argument for option '" + option + "' is invalid";
  if (dynamic_cast<const po::multiple_occurrences*>(&e)) return "option '" + option + "' cannot be given more than once";
  if (dynamic_cast<const po::ambiguous_option*>(&e)) return "option '" + option + "' is ambiguous";
  return "invalid use of option '" + option + "'";
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  try {
    if (args.empty()) {
      usage(err);
      return 2;
    }
    const std::string command = args[0];
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (command == "-h" || command == "--help" || command == "help") {
      usage(out);
      return 0;
    }
    if (command == "--version" || command == "version") {
      out << "servesim " << SERVESIM_VERSION << "\n";
      return 0;
    }
    std::string names;
    for (const Command* c : commands()) {
      if (c->name == command) return c->run(rest, out, err);
      names += (names.empty() ? "" : ", ") + c->name;
    }
    throw UsageError("unknown command '" + command + "'; commands: " + names + " (servesim --help)");
  } catch (const UsageError& e) {
    err << "servesim: " << shown(e.what()) << "\n";
    return 2;
  } catch (const boost::program_options::error_with_option_name& e) {
    err << "servesim: " << shown(boost_message(e, args).c_str()) << " (servesim --help)\n";
    return 2;
  } catch (const boost::program_options::error& e) {
    err << "servesim: " << shown(e.what()) << " (servesim --help)\n";
    return 2;
  } catch (const core::ConfigError& e) {
    err << "servesim: configuration error: " << shown(e.what()) << "\n";
    return 2;
  } catch (const core::InputError& e) {
    err << "servesim: input error: " << shown(e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "servesim: error: " << shown(e.what()) << "\n";
    return 1;
  }
}

}  // namespace servesim::experiments
