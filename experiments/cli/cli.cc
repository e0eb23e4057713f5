#include "experiments/cli/cli.h"

#include <boost/program_options/errors.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "experiments/cli/command.h"
#include "sim/core/error.h"

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
    err << "servesim: " << e.what() << "\n";
    return 2;
  } catch (const boost::program_options::error& e) {
    err << "servesim: " << e.what() << " (servesim --help)\n";
    return 2;
  } catch (const core::ConfigError& e) {
    err << "servesim: configuration error: " << e.what() << "\n";
    return 2;
  } catch (const core::InputError& e) {
    err << "servesim: input error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "servesim: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace servesim::experiments
