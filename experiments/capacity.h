#pragma once
// servesim capacity: per configuration of an experiment (the product of its axes), the highest
// arrival rate the configuration sustains: its queue stays stationary and its steady-state SLO
// attainment stays at or above a target. Found by bracketing (doubling or halving from a start value
// until one probe passes and one fails) and bisection until (lowest failing - highest passing) <=
// tolerance x highest passing. The "rate" is a knob of the configuration: workload.rate (an arrival
// rate, req/s) for generators, workload.rate_scale (a replay speed: 1 = the trace's recorded rate)
// for traces.
//
// A probe runs the configuration at one knob value with every seed of the experiment and pools them:
// attainment = requests arriving in the measurement window that meet the SLO / all of them. The
// window is the steady state: unless the experiment sets [measurement], probes find the warm-up with
// MSER-5 (measurement.auto_warmup). A probe passes when that attainment meets the target and every
// run's queue is stationary ([capacity] require_stationary): a rate whose queue still grows at the
// end is not sustainable, whatever a short run's attainment says. Short runs near capacity cannot
// tell: the batch may still be filling, or the queue growing too slowly to see. So a probe passes
// only when its runs have settled (the growth's 99% upper bound below 2% of the arrival rate), and
// a probe that meets the target without settling runs again with twice the requests
// (workload.max_requests), up to [capacity] extend_up_to requests, the search keeping the longer
// length for its later probes; at that limit, or for a workload that cannot be lengthened (a trace
// read to its end), no significant growth is enough. Probes run in rounds (one probe per search
// still going, in parallel); with a database they are stored like sweep points, so a killed
// search resumes, and the database does not depend on --jobs.
//
// With replications = N the experiment's N seeds are independent replications, and each is searched
// on its own: the sustainable rate is the mean of their knees with a 95% Student-t interval.
//
// A cliff: between two consecutive probes, the attainment (0 for a queue that is not stationary:
// it loses every request in the long run) falls faster than [capacity] cliff_slope points per 1%
// more load. The margin is how far the sustainable rate sits below the first cliff above it.
//
// Bisection assumes attainment falls as the rate rises; with few requests it is noisy, and the
// search then finds one of the crossings.
//
// Cheapest configuration: every configuration at one knob value (cheapest_at); the lowest $/1M
// output tokens (over the window) among those that meet the target, each with a 95% interval
// (across replications, or from the batch-means interval of one run's token throughput), and which
// configurations cannot be told apart from the one ranked above them.

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "experiments/experiment.h"
#include "experiments/results_db.h"
#include "sim/metrics/steady_state.h"

namespace servesim::experiments {

struct CapacityOptions {
  std::string db_path;                 // "" = keep no runs
  int jobs = 0;
  std::optional<double> target;        // override [capacity] target
  std::optional<double> tolerance;     // override [capacity] tolerance
  std::optional<double> cheapest_at;   // override [capacity] cheapest_at
  std::ostream* progress = nullptr;
  bool progress_tty = false;
  double progress_period_s = 10;
};

// One knob value of one configuration, pooled over the seeds; figures over the measurement window.
struct Probe {
  double value = 0;              // the knob's value
  double slo_attainment = 0;     // pooled over seeds: window requests meeting the SLO / window requests
  bool stationary = true;        // no run's queue grows significantly
  bool settled = true;           // every run's growth is bounded below 2% of its arrivals (steady_state.h)
  double trend_req_s = 0;        // the growth of the requests in the system, mean over seeds
  double goodput_req_s = 0;      // mean over seeds
  double offered_req_s = 0;      // mean over seeds
  double throughput_output_tok_s = 0;
  double usd_per_mtok_output = 0;  // pooled: the windows' cost / their output tokens
  // 95% interval of usd_per_mtok_output (NaN: unknown): from one run's batch-means interval of its
  // token throughput, or set across replications by the cheapest search.
  double usd_lo = std::numeric_limits<double>::quiet_NaN(), usd_hi = std::numeric_limits<double>::quiet_NaN();
  double gpus = 0;               // GPU-hours x 3600 / simulated seconds
  double ttft_ms_p90 = 0, tpot_ms_p90 = 0;  // mean over seeds
  bool pass = false;
  int64_t max_requests = 0;      // workload.max_requests of its runs (0: the workload's own end)
  bool superseded = false;       // met the target without settling; rerun longer at the same value
  bool extended_to_limit = false;  // ran with [capacity] extend_up_to requests or fewer and still not settled
  std::vector<int64_t> run_ids;  // in the database (0 without one)
  // Why it failed: "attainment", "not stationary" (both: "not stationary"), "not settled" (superseded);
  // "" when it passed.
  std::string why() const;
};

enum class KneeStatus { kFound, kBelowMin, kAboveMax, kProbeLimit, kInfeasible };
std::string knee_status_text(KneeStatus status);

// Where attainment falls off: between probes `from` and `to` (consecutive in knob value).
struct Cliff {
  double from = 0, to = 0;                     // knob values
  double attainment_from = 0, attainment_to = 0;  // (0 for a queue that is not stationary)
  double slope = 0;                            // attainment points lost per 1% more load
};

// One bisection: a configuration with every seed pooled, or one replication of it.
struct Search {
  std::vector<uint64_t> seeds;     // empty: the configuration's own seed
  std::vector<Probe> probes;       // in the order they ran
  KneeStatus status = KneeStatus::kProbeLimit;
  std::optional<Probe> knee;       // the highest passing probe
  double lowest_failing = std::numeric_limits<double>::infinity();
  std::optional<Cliff> cliff;      // the first cliff at or above the knee
};

struct ConfigurationCapacity {
  std::vector<Setting> settings;   // the configuration's axis values
  std::string label;
  std::string knob;
  // Without replications: the one search's probes, status, knee and lowest failing probe. With
  // them: status found when every replication's is; knee = the replications' knees averaged
  // (value = the mean sustainable rate); lowest_failing averaged likewise; probes empty.
  std::vector<Probe> probes;
  KneeStatus status = KneeStatus::kProbeLimit;
  std::optional<Probe> knee;
  double lowest_failing = std::numeric_limits<double>::infinity();
  std::string infeasible;          // kInfeasible: why the cluster cannot be built
  std::vector<Search> replications;  // one per replication (replications = N); else empty
  metrics::Interval sustainable;   // the knee value (mean and 95% interval across replications)
  // The reported 95% range of the sustainable rate: each replication's rate lies between its knee
  // and its lowest failing probe, so [lower end of the knees' interval, upper end of the lowest
  // failing probes' interval]: the replications' spread and the bisection's resolution. NaN: unknown.
  double range_lo = std::numeric_limits<double>::quiet_NaN(), range_hi = std::numeric_limits<double>::quiet_NaN();
  std::optional<Cliff> cliff;      // the first cliff above the knee (the lowest across replications)
  double margin = std::numeric_limits<double>::quiet_NaN();  // (cliff.from - knee) / knee (with replications: the smallest of theirs); NaN: no cliff
};

// What the knob means: "arrival rate (req/s)", "replay speed (x the trace's recorded rate)", or the key.
std::string knob_meaning(const std::string& knob);
// The column header of the highest passing value: "max rate", "max replay speed", or "max <key>".
std::string knob_header(const std::string& knob);

// N+1 sizing ([capacity] headroom): one configuration all up and with one replica (node) down.
struct HeadroomPair {
  std::string label;          // the configuration without the headroom axis
  size_t all_up = 0, one_down = 0;  // indices into CapacityResult::configurations
  // The rate sustained with one down over the rate all up (NaN: either unknown), and the extra
  // $/1M output tokens of sizing for it: the knee's cost with one down (every replica paid for, one
  // serving nothing) over the knee's cost all up, minus 1.
  double kept = std::numeric_limits<double>::quiet_NaN();
  double cost = std::numeric_limits<double>::quiet_NaN();
};

struct CapacityResult {
  std::string headroom;            // "", "replica", "node"
  std::vector<HeadroomPair> pairs; // with a headroom: one per configuration of the other axes
  double target = 0;
  double tolerance = 0;
  bool require_stationary = true;
  double cliff_slope = 0;
  int64_t replications = 0;        // 0: seeds pooled in each probe
  std::string slo_text;            // of the first configuration: "TTFT <= 2000 ms, TPOT <= 100 ms"
  std::vector<ConfigurationCapacity> configurations;
  int64_t runs = 0;                // simulations run now
  int64_t reused = 0;              // found in the database
};

// The answer of a capacity search as the database stores it (experiment key capacity_result) for
// servesim report: a header line, then one tab-separated line per configuration with the fields of
// kCapacityTableHeader; unknown numbers empty. interval_lo/hi: the 95% range across replications,
// or without them the search's bracket [highest passing, lowest failing].
inline constexpr const char* kCapacityTableHeader =
    "configuration\tknob\tstatus\tsustainable\tinterval_lo\tinterval_hi\tlowest_failing\tcliff_from\tmargin\t"
    "replications\ttarget";
std::string capacity_table(const CapacityResult& result);

CapacityResult run_capacity(Experiment& experiment, const CapacityOptions& options);
// The all-up / one-down pairs of a search with a headroom axis (the last axis).
std::vector<HeadroomPair> headroom_pairs(const std::vector<ConfigurationCapacity>& configurations);

struct CheapestResult {
  double load = 0;
  double target = 0;
  std::string slo_text;
  int64_t replications = 0;
  std::string interval_method;     // how the $/1M token intervals were made
  std::vector<ConfigurationCapacity> configurations;  // one probe each, sorted by $/1M output tokens
  std::optional<size_t> best;                         // index of the cheapest that meets the target
  // tied_with_above[i]: configuration i's cost cannot be told apart from configuration i - 1's (the
  // paired interval of their difference across replications holds 0; without replications, their
  // intervals overlap).
  std::vector<bool> tied_with_above;
  int64_t runs = 0, reused = 0;
};

CheapestResult run_cheapest(Experiment& experiment, const CapacityOptions& options);

}  // namespace servesim::experiments
