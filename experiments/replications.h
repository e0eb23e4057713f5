#pragma once
// Replications: independent runs of one configuration, and the confidence intervals across them.
//
// Replication i (from 0) of a configuration runs with seed = its seed + i, so its arrivals, lengths
// and random routing are drawn afresh. A trace replay draws nothing from the seed; its replications
// replay block bootstraps of the trace instead ([replication] resample_trace = true, drawn from each
// replication's seed; traces/block_bootstrap.h). Each replication is an ordinary run (its own row in
// `runs`, reproducible alone from its stored configuration and seed). Across them every summary
// value gets its mean and a 95% Student-t interval, mean +- t_{n-1,0.975} sd / sqrt(n): replications
// are independent by construction, so the interval needs no assumption about correlation within a
// run (batch means, sim/metrics/steady_state.h, is the within-run alternative).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "experiments/run.h"
#include "sim/metrics/steady_state.h"

namespace servesim::experiments {

// Whether the configuration's workload is a trace replay, whose arrivals the seed does not change
// (the kinds azure_csv and mooncake_jsonl).
bool replays_trace(const core::Params& config);

// The --set overrides that make replication `index` of `config`: seed = config's seed + index, and
// for a trace replay replication.resample_trace = true unless the configuration set it. Throws
// core::ConfigError at workload.seed when the workload's own seed would make every replication the
// same run.
std::vector<std::string> replication_overrides(const core::Params& config, int64_t index);

// One summary value across replications.
struct ReplicatedMetric {
  std::string name;
  metrics::Interval interval;  // of the replications that know it (NaN values are left out)
  std::vector<double> values;  // per replication, in order
};
// Every summary value (metrics::flatten) across the summaries, in flatten's order.
std::vector<ReplicatedMetric> across_replications(const std::vector<metrics::RunSummary>& runs);
const ReplicatedMetric* find_metric(const std::vector<ReplicatedMetric>& metrics, const std::string& name);

struct ReplicationOptions {
  int64_t count = 2;      // replications, >= 2
  int jobs = 0;           // simulations in parallel (0 = every core)
  std::string db_path;    // "" = no database
  std::string csv_dir;    // "" = no CSV
  bool check = false;     // every replication under the invariant checker
};

struct ReplicationResult {
  std::vector<RunResult> runs;            // in replication order
  std::vector<ReplicatedMetric> metrics;  // across_replications of their summaries
  bool resampled = false;                 // a trace replay: each replication a block bootstrap
};

// Runs `configs` on options.jobs threads into memory, then writes them to options' database and CSV
// directory in order (consecutive run ids), so the outputs do not depend on the thread count; nothing
// is written unless every run ran. An error of run i is prefixed with what(i). options.count is not
// used.
std::vector<RunResult> run_in_order(const std::vector<core::Params>& configs, const ReplicationOptions& options,
                                    const std::function<std::string(size_t)>& what);

// Runs the replications of the configuration `load` returns (given the extra overrides of each
// replication) on `jobs` threads, then writes them to the database and CSV directory in replication
// order (consecutive run ids), so the outputs do not depend on `jobs`. Nothing is written unless
// every replication ran.
ReplicationResult run_replications(const std::function<core::Params(const std::vector<std::string>&)>& load,
                                   const ReplicationOptions& options);

}  // namespace servesim::experiments
