#pragma once
// The fixed benchmark scenarios of `servesim bench` (issue 6): each a complete run configuration,
// run without result outputs so that the figure is the simulator's own speed.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace servesim::experiments {

struct BenchScenario {
  std::string name;         // "S1"
  std::string description;
  std::string trace;        // file under the traces directory it needs, "" for none
  std::string config;       // TOML; "@TRACES@" stands for the traces directory
};

const std::vector<BenchScenario>& bench_scenarios();
const BenchScenario* find_bench_scenario(const std::string& name);

struct BenchSample {
  double wall_seconds = 0;
  uint64_t requests = 0;
  uint64_t iterations = 0;
  uint64_t events = 0;
  double sim_seconds = 0;
  double peak_rss_mib = 0;   // of the process that ran it
  std::string percentiles = "exact";  // how the run kept its latency percentiles (RunSummary::percentiles)
  uint64_t runs = 0;            // S7: simulations the capacity search ran
  uint64_t configurations = 0;  // S7: configurations searched
  double cpu_seconds = 0;       // S5: user + system CPU of the sweep, every thread (0: not measured)
};

// The sweep scenario S5: `servesim sweep` of experiments/sweeps/bench64.toml (64 points) with
// `jobs` threads, into a fresh database in a temporary directory. `experiments_dir` holds sweeps/.
BenchSample run_bench_sweep(const std::string& experiments_dir, int jobs);

// The capacity scenario S7: `servesim capacity` of experiments/sweeps/bench_capacity.toml (8
// configurations of the Azure conv trace) on one thread, keeping no runs.
BenchSample run_bench_capacity(const std::string& experiments_dir);

// Runs one scenario in this process. `requests` > 0 overrides the scenario's request count (for
// scaling curves). Throws core::Error when its trace is missing.
BenchSample run_bench_scenario(const BenchScenario& s, const std::string& traces_dir, int64_t requests = 0);

}  // namespace servesim::experiments
