#pragma once
// Per-request and per-run metrics, defined as the seeds and the serving benchmarks define them.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/lifecycle.h"
#include "sim/metrics/stats.h"
#include "sim/metrics/steady_state.h"

namespace servesim::metrics {

// Latency limits a request must meet to count towards goodput. Unset limits do not apply.
struct Slo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2e_ms;
};

// Measured where a client measures them (the engine's client path included): TTFT = the client has
// the first token - the client sent the request; TPOT = (E2E - TTFT) / (N_out - 1), undefined for
// one output token; E2E = the client has the last token - the client sent the request.
struct RequestMetrics {
  double ttft_ms = 0;
  std::optional<double> tpot_ms;
  double e2e_ms = 0;
  bool meets_slo = false;  // completed and within every set limit
};
RequestMetrics request_metrics(const core::RequestRecord& r, const Slo& slo);

// Identifies a run in the results.
struct RunInfo {
  std::string config_toml;   // the resolved configuration, canonical form
  std::string config_hash;   // 16 hex digits of FNV-1a 64 over config_toml
  uint64_t seed = 0;
  std::string version;
  int64_t run_id = 0;        // assigned by the first sink that numbers runs
  // The workload's request classes by index (RequestRecord::request_class); empty without classes.
  // With classes, the per-request outputs carry a `class` column (the name).
  std::vector<std::string> class_names;
};

// A named number of the results.
struct NamedValue {
  std::string name;
  double value;
  bool integer;
  // Every value is finite and >= 0 except: a `nullable` one may be NaN, unknown (NULL in SQLite, an
  // empty CSV field, null in JSON), and a `signed_value` may be negative.
  bool nullable = false;
  bool signed_value = false;
};

// One request class's share of a run (table class_stats; runs with [[workload.classes]] only).
// Latencies over its completed requests; attainment and goodput against its own SLO limits where
// it has them, the run's [slo] for the others.
struct ClassSummary {
  std::string name;
  std::string tenant;
  int64_t priority = 0;
  uint64_t requests = 0;            // arrived
  uint64_t completed = 0;
  uint64_t rejected = 0;            // every rejection, admission control's included
  uint64_t rejected_admission = 0;  // of those, shed by admission control
  uint64_t timed_out = 0;
  uint64_t failed = 0;
  uint64_t meeting_slo = 0;
  int64_t output_tokens = 0;        // of completed requests
  LatencyStats ttft_ms, tpot_ms, e2e_ms;
  double throughput_req_s = 0;      // completed per simulated second (the whole run)
  double goodput_req_s = 0;         // completed within the class's SLO per simulated second
  double slo_attainment = 0;        // meeting_slo / requests
  double ttft_slo_ms = 0;           // the limits applied (NaN: none)
  double tpot_slo_ms = 0;
};

struct RunSummary {
  uint64_t requests_total = 0;
  uint64_t requests_completed = 0;
  uint64_t requests_rejected = 0;
  uint64_t rejected_context = 0;
  uint64_t rejected_kv_capacity = 0;
  uint64_t requests_timed_out = 0;  // their client gave up (the workload's client_timeout_s)
  double sim_seconds = 0;       // from 0 to the last event
  double wall_seconds = 0;      // host time of the simulation (not stored in the database)
  uint64_t events = 0;
  uint64_t iterations = 0;
  LatencyStats ttft_ms, tpot_ms, itl_ms, e2e_ms;
  int64_t prompt_tokens = 0;    // of completed requests
  int64_t output_tokens = 0;    // of completed requests
  double throughput_req_s = 0;
  double throughput_output_tok_s = 0;
  uint64_t requests_meeting_slo = 0;
  double goodput_req_s = 0;     // completed requests meeting every SLO limit, per simulated second
  double slo_attainment = 0;    // requests meeting the SLO / all requests (rejected and timed-out ones miss it)
  double gpu_hours = 0;         // replicas x TP x sim_seconds / 3600
  double cost_usd = 0;
  double cost_usd_per_mtok_output = 0;
  // The same over the measurement window [t0, t1] (by default the arrival window [0, last
  // arrival]; [measurement] moves t0 past a warm-up and t1 before a cool-down): what the cluster
  // finished in the window, per second of it (the figures above divide the whole run, drain
  // included, as `vllm bench serve` does, which biases short runs low). Counted: requests that
  // left in the window (by default: by the last arrival), their output tokens, those of them
  // meeting the SLO; the GPU cost of the window. arrival_window_s is the window's length.
  double arrival_window_s = 0;
  double throughput_req_s_window = 0;
  double throughput_output_tok_s_window = 0;
  double goodput_req_s_window = 0;
  double cost_usd_per_mtok_output_window = 0;
  // Requests queued or running at the replicas, averaged over the run (Little's law: throughput x
  // mean E2E on a unified cluster).
  double mean_requests_in_system = 0;
  double mfu_mean = 0;          // iteration-time-weighted model FLOPs utilisation
  double mbu_mean = 0;          // iteration-time-weighted memory bandwidth utilisation
  double kv_util_mean = 0;      // time-weighted KV blocks used / capacity, whole cluster
  double mean_batch_size = 0;   // iteration-time-weighted sequences per iteration
  uint64_t preemptions = 0;
  // Prefix caching (first admission of each request).
  uint64_t prefix_prompt_blocks = 0;    // prefix hash blocks covering the prompts looked up
  uint64_t prefix_matched_blocks = 0;   // of those, found in the cache (longest cached chain)
  double prefix_block_hit_rate = 0;     // matched / prompt blocks
  int64_t prefix_prompt_tokens = 0;
  int64_t prefix_hit_tokens = 0;        // prompt tokens whose prefill a hit skipped
  double prefix_token_hit_rate = 0;     // hit tokens / prompt tokens
  double prefix_saved_tflop = 0;        // prefill FLOPs the hits skipped, 1e12
  // Prefill -> decode KV transfers (disaggregation).
  uint64_t kv_transfers = 0;
  double kv_transfer_gb = 0;            // 1e9 bytes
  LatencyStats kv_transfer_ms;          // from the transfer's start to KV arrival
  // Pulls (pd_pull = reserve_first) that waited for decode blocks: how many, their waits from the
  // prefill's end to the transfer's start (total and longest), and the most waiting at once over
  // the decode pool (a pull whose client gave up while it waited counts there only).
  uint64_t pull_waits = 0;
  double pull_wait_s = 0;
  double pull_wait_max_ms = 0;
  uint64_t pulls_waiting_peak = 0;
  // Speculative decoding (zero without it). A verify step is one sequence's decode in one iteration
  // that verified draft tokens.
  uint64_t spec_verify_steps = 0;
  int64_t spec_draft_tokens = 0;        // draft tokens verified
  int64_t spec_accepted_tokens = 0;     // of those, accepted by the target
  double spec_acceptance_rate = 0;      // accepted / draft tokens
  double spec_mean_accepted_length = 0; // tokens a verify step yields: 1 + accepted / verify steps
  // Output tokens per inter-token gap (per streamed chunk after the first): 1 without speculation.
  double tokens_per_gap = 0;
  // The measurement window and the run's steady state (steady_state.h). The *_window figures above
  // are those of the measurement window: arrival_window_s is its length, and by default it is the
  // arrival window [0, last arrival].
  SteadyState steady;
  // Fleet dynamics ([faults]): replica_failures, requests_rerouted, requests_failed, ... Empty for a
  // run without them; kept out of the `runs` columns (table fleet_metrics), so that the results of
  // runs without fleet dynamics keep their layout.
  std::vector<NamedValue> fleet;
  // Of prefix_hit_tokens, those a host KV tier's loads supplied ([kv_tiers.host]; 0 without one). The
  // tier's figures (kv_host_*) are appended to `fleet` by the run, as optional per-run metrics.
  int64_t prefix_host_hit_tokens = 0;
  // Of prefix_hit_tokens, those loaded from the shared KV store ([kv_tiers.store]; 0 without one).
  int64_t prefix_store_hit_tokens = 0;
  // Of prefix_hit_tokens, those loaded from a local NVMe KV tier ([kv_tiers.nvme]; 0 without one).
  int64_t prefix_nvme_hit_tokens = 0;
  // With a KV tier: requests admitted again after their KV was dropped (a recompute preemption, a
  // failover), whose HBM and tier hits were decided again, and those admissions' hits (HBM and tiers,
  // then each tier's share). Not in the hit figures above (first lookups only, so that a hit rate
  // stays a share of the prompt tokens); appended to `fleet` as kv_reloads, kv_<tier>_reload_tokens.
  uint64_t prefix_reloads = 0;
  int64_t prefix_reload_hit_tokens = 0;
  int64_t prefix_host_reload_tokens = 0;
  int64_t prefix_store_reload_tokens = 0;
  int64_t prefix_nvme_reload_tokens = 0;
  // Shed by admission control ([admission]); counted in requests_rejected, kept out of the `runs`
  // columns (class_stats has it per class) so that runs without admission control keep their layout.
  uint64_t rejected_admission = 0;
  // How the latency percentiles above (and per class, per client) were computed: "exact" (every
  // value kept and sorted) or "sketch" (QuantileSketch, stats.h: each percentile within
  // percentile_relative_error of the exact one; means exact). ITL always comes from a log histogram.
  // Not a `runs` column, so that the results of exact runs keep their layout.
  std::string percentiles = "exact";
  double percentile_relative_error = 0;
  // Per request class ([[workload.classes]]), in the order the configuration defines them; empty
  // without classes.
  std::vector<ClassSummary> classes;
};

// One replica's share of a run (table replica_stats).
struct ReplicaStats {
  uint32_t replica = 0;
  std::string role;                 // "unified", "prefill", "decode"
  std::string gpu;
  int64_t tensor_parallel = 1;
  uint64_t routed = 0;              // requests the router sent here (first admission)
  uint64_t completed = 0;           // requests that finished here
  uint64_t iterations = 0;
  double busy_seconds = 0;
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;        // output tokens decode steps emitted
  uint64_t preemptions = 0;
  uint64_t prefix_prompt_blocks = 0;
  uint64_t prefix_matched_blocks = 0;
  int64_t prefix_prompt_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  double prefix_saved_tflop = 0;
  double mfu = 0;                   // over its busy time
  double mbu = 0;
  double kv_util_mean = 0;          // time-weighted, whole run
  int64_t spec_draft_tokens = 0;    // speculative decoding: draft tokens verified here
  int64_t spec_accepted_tokens = 0; // of those, accepted
};

// The summary as named numbers, in a fixed order: the columns of the `runs` table and of runs.csv.
// Latency statistics appear as ttft_ms_mean, ttft_ms_p50, ...
std::vector<NamedValue> flatten(const RunSummary& s);
// A replica's numbers (everything but replica, role and gpu), in the column order of replica_stats.
std::vector<NamedValue> flatten(const ReplicaStats& r);
// A class's numbers (everything but name and tenant), in the column order of class_stats.
std::vector<NamedValue> flatten(const ClassSummary& c);

}  // namespace servesim::metrics
