#pragma once
// One simulation run from a validated configuration: builds the workload, model, GPUs, cost model,
// cluster, router and schedulers from their registries, runs the event loop, and hands the results
// to the sinks. This is the only place that knows every kind of component.

#include <string>
#include <vector>

#include "sim/core/params.h"
#include "sim/metrics/summary.h"

namespace servesim::experiments {

// The schema of a run configuration: seed, [workload], [model], [gpu], [cost_model], [cluster],
// [router], [scheduler], [slo], [output].
const std::vector<core::ParamSpec>& run_schema();

// Loads and validates CONFIG.toml with "--set section.key=value" overrides.
core::Params load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});

struct RunOutputs {
  std::string db_path;   // "" = no database
  std::string csv_dir;   // "" = no CSV
};

struct RunResult {
  metrics::RunSummary summary;
  metrics::RunInfo info;
  // Echoes for the report.
  std::string workload_kind, model_kind, gpu_kind, router_kind, scheduler_kind;
  int64_t replicas = 0, tensor_parallel = 0, kv_blocks_per_replica = 0, block_size = 0;
  double usd_per_gpu_hour = 0;
  metrics::Slo slo;
};

// Runs the simulation. Throws core::ConfigError for inconsistent settings (before anything is
// written), core::InputError for malformed traces, core::Error otherwise; on any throw, the run
// leaves no rows in the outputs.
RunResult run_simulation(const core::Params& config, const RunOutputs& outputs);

// The resolved configuration's hash: 16 hex digits of FNV-1a 64 over Params::to_toml().
std::string config_hash(const core::Params& config);

}  // namespace servesim::experiments
