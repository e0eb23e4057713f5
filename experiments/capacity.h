#pragma once
// servesim capacity: per configuration of an experiment (the product of its axes), the highest
// arrival rate at which SLO attainment stays at or above a target, found by bracketing (doubling or
// halving from a start value until one probe passes and one fails) and bisection until
// (lowest failing - highest passing) <= tolerance x highest passing. The "rate" is a knob of the
// configuration: workload.rate for generators, workload.rate_scale (a replay speed-up) for traces.
//
// A probe runs the configuration at one knob value with every seed of the experiment and pools
// them: attainment = requests meeting the SLO / all requests. Probes run in rounds (one probe per
// configuration still searching, in parallel); with a database they are stored like sweep points,
// so a killed search resumes, and the database does not depend on --jobs.
//
// Bisection assumes attainment falls as the rate rises; with few requests it is noisy, and the
// search then finds one of the crossings.
//
// Cheapest configuration: every configuration at one knob value (cheapest_at); the lowest
// $/1M output tokens among those that meet the target.

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "experiments/experiment.h"
#include "experiments/results_db.h"

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

// One knob value of one configuration, pooled over the seeds.
struct Probe {
  double value = 0;              // the knob's value
  double slo_attainment = 0;     // pooled over seeds
  double goodput_req_s = 0;      // mean over seeds
  double offered_req_s = 0;      // mean over seeds
  double throughput_output_tok_s = 0;
  double usd_per_mtok_output = 0;  // pooled: total cost / total output tokens
  double gpus = 0;               // GPU-hours x 3600 / simulated seconds
  double ttft_ms_p90 = 0, tpot_ms_p90 = 0;  // mean over seeds
  bool pass = false;
  std::vector<int64_t> run_ids;  // in the database (0 without one)
};

enum class KneeStatus { kFound, kBelowMin, kAboveMax, kProbeLimit, kInfeasible };
std::string knee_status_text(KneeStatus status);

struct ConfigurationCapacity {
  std::vector<Setting> settings;   // the configuration's axis values
  std::string label;
  std::string knob;
  std::vector<Probe> probes;       // in the order they ran
  KneeStatus status = KneeStatus::kProbeLimit;
  std::optional<Probe> knee;       // the highest passing probe
  double lowest_failing = std::numeric_limits<double>::infinity();
  std::string infeasible;          // kInfeasible: why the cluster cannot be built
};

struct CapacityResult {
  double target = 0;
  double tolerance = 0;
  std::string slo_text;            // of the first configuration: "TTFT <= 2000 ms, TPOT <= 100 ms"
  std::vector<ConfigurationCapacity> configurations;
  int64_t runs = 0;                // simulations run now
  int64_t reused = 0;              // found in the database
};

CapacityResult run_capacity(Experiment& experiment, const CapacityOptions& options);

struct CheapestResult {
  double load = 0;
  double target = 0;
  std::string slo_text;
  std::vector<ConfigurationCapacity> configurations;  // one probe each, sorted by $/1M output tokens
  std::optional<size_t> best;                         // index of the cheapest that meets the target
  int64_t runs = 0, reused = 0;
};

CheapestResult run_cheapest(Experiment& experiment, const CapacityOptions& options);

}  // namespace servesim::experiments
