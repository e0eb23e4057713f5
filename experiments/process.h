#pragma once
// Running another program (gnuplot for reports, sbatch for Slurm) and collecting what it prints.

#include <string>
#include <vector>

namespace servesim::experiments {

struct ProcessResult {
  int exit_code = -1;   // the program's exit status; 128 + signal when killed
  std::string out;      // what it wrote to stdout
  std::string err;      // and to stderr
};

// Runs argv[0] (looked up in PATH) with the arguments, waits for it and returns its output. Throws
// core::Error when it cannot be started (naming the program).
ProcessResult run_process(const std::vector<std::string>& argv);

// The full path of `program` in PATH, or "" when there is none.
std::string find_program(const std::string& program);

// The path of the running executable (/proc/self/exe), or "" when unknown.
std::string self_executable();

}  // namespace servesim::experiments
