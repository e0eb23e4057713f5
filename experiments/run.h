#pragma once
// One simulation run from a validated configuration: builds the workload, model, GPUs, cost model,
// cluster, router and schedulers from their registries, runs the event loop, and hands the results
// to the sinks. This is the only place that knows every kind of component.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sim/core/digest.h"
#include "sim/core/params.h"
#include "sim/core/lifecycle.h"
#include "sim/metrics/sink.h"
#include "sim/metrics/summary.h"

namespace servesim::experiments {

// The schema of a run configuration: seed, [workload], [model], [gpu], [cost_model], [cluster]
// (with optional [cluster.prefill] and [cluster.decode] pools), [network], [router],
// [decode_router], [scheduler], [decoding], [slo], [output].
const std::vector<core::ParamSpec>& run_schema();

// Loads and validates CONFIG.toml with "--set section.key=value" overrides.
core::Params load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});

struct RunOutputs {
  std::string db_path;   // "" = no database
  std::string csv_dir;   // "" = no CSV
  bool check = false;    // attach metrics::InvariantChecker (servesim run --check; always on in tests)
  // Sweeps and --timeline (issue 5): sinks and lifecycle observers besides the database and CSV
  // (not owned), the run's number in the sinks (0 = the next free one), and a check-only mode that
  // builds every component, so that construction errors surface, and returns without running.
  std::vector<metrics::ResultSink*> sinks = {};
  std::vector<core::LifecycleObserver*> observers = {};
  int64_t run_id = 0;
  bool build_only = false;
  // Other outputs of the run (the CLI's --timeline), committed with the sinks: `stage` runs once
  // the run has finished and every sink has staged its rows, before anything is committed (a throw
  // leaves every output as it was); `publish` runs after the sinks have committed.
  std::function<void(const metrics::RunInfo&)> stage = {};
  std::function<void()> publish = {};
};

struct RunResult {
  metrics::RunSummary summary;
  metrics::RunInfo info;
  // Echoes for the report.
  std::string workload_kind, model_kind, gpu_kind, router_kind, scheduler_kind;
  std::string decoding_kind = "none";  // speculative decoding method
  int64_t replicas = 0, tensor_parallel = 0, kv_blocks_per_replica = 0, block_size = 0;
  double usd_per_gpu_hour = 0;
  metrics::Slo slo;
  metrics::MeasurementConfig measurement;
  struct PoolInfo {
    std::string role;  // "unified", "prefill", "decode"
    int64_t replicas = 0, tensor_parallel = 0, kv_blocks_per_replica = 0;
    // Expert parallelism (1, 1, 0, 1 without): GPUs per replica, attention ranks, redundant experts,
    // and the placement's busiest-GPU load over the mean.
    int64_t expert_parallel = 1, attention_data_parallel = 1, redundant_experts = 0;
    double expert_imbalance = 1;
    std::string gpu_kind, scheduler_kind;
    double usd_per_gpu_hour = 0;
    std::string calibration;           // the calibration profile's path, "" = none
    bool calibration_default = false;  // the GPU's shipped profile, used because none was named
    std::string engine_kind;
  };
  std::vector<PoolInfo> pools;
  // How the run went, not what it gave (the results are the same either way): whether its replicas
  // ran ahead of the clock (sim::Cluster::runs_ahead), and the events handled in line or ahead.
  bool ran_ahead = false;
  uint64_t events_in_line = 0;
};

// Runs the simulation. Throws core::ConfigError for inconsistent settings (before anything is
// written), core::InputError for malformed traces, core::Error otherwise; on any throw, the run
// leaves no rows in the outputs.
RunResult run_simulation(const core::Params& config, const RunOutputs& outputs);

// Every file the configuration names (its path parameters: trace, model config.json, length files,
// calibration profile), by resolved path, with its content digest. A file that cannot be read is
// left out (building the run reports it, at its key).
std::map<std::string, core::FileDigest> input_files(const core::Params& config);

// The calibration profile each pool of the run's cluster uses, by pool ("cluster", or
// "cluster.prefill" and "cluster.decode"): its path, "" for none (as run_simulation selects them).
std::map<std::string, std::string> calibration_profiles(const core::Params& config);

// The identity of a run: 16 hex digits of FNV-1a 64 over the resolved configuration
// (Params::to_toml()) in which every file path is replaced by the file's content digest, so that
// the hash changes with what a file holds and not with where it lies or the working directory.
// A configuration without paths hashes its to_toml() text.
std::string config_hash(const core::Params& config);
std::string config_hash(const core::Params& config, const std::map<std::string, core::FileDigest>& files);

}  // namespace servesim::experiments
