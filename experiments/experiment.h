#pragma once
// An experiment file: a base run configuration and the axes a sweep (or a capacity search) varies.
//
//   name = "routers"                  # optional; default: the file's name without .toml
//   base = "../quickstart.toml"       # a run configuration (relative to this file), or an inline [base]
//   seeds = [1, 2, 3]                 # repeat every point with these seeds (or: repetitions = 3)
//   replications = 5                  # or: 5 independent replications (seed, seed + 1, ...; a trace
//                                     # replays block bootstraps of itself); capacity searches each
//   infeasible = "error"              # or "skip": leave out points whose cluster cannot be built
//
//   [set]                             # overrides of the base, like --set (nested keys)
//   workload.max_requests = 500
//
//   [[axis]]                          # a list axis
//   key = "router.kind"
//   values = ["round_robin", "least_outstanding"]
//
//   [[axis]]                          # a range axis (inclusive; step = ..., or count = N, scale = "log")
//   key = "workload.rate"
//   from = 10
//   to = 40
//   step = 10
//
//   [[axis]]                          # a zipped axis: several keys that advance together
//   keys = ["gpu.kind", "cluster.tensor_parallel"]
//   values = [["h100-sxm", 1], ["a100-80gb-sxm", 2]]
//
//   [capacity]                        # settings of `servesim capacity` (see capacity.h)
//   target = 0.9
//
// Points are the cartesian product of the axes in file order (the first axis varies slowest), each
// repeated over the seeds (fastest). An axis value is applied exactly like `--set key=value`, so
// unknown keys, kinds, types and ranges are errors; they name this file's line and column.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/params.h"

namespace servesim::experiments {

// One `key = value` applied to the base configuration.
struct Setting {
  std::string key;                 // dotted configuration key ("router.kind", "seed")
  std::string value;               // the value as TOML text ("\"random\"", "20", "2.5")
  core::SourceLocation key_where;  // where the experiment names the key
  core::SourceLocation value_where;  // where it writes the value
  int axis = -1;                   // the [[axis]] it comes from (-1: seeds, [set], the capacity knob)
  std::string axis_name = {};      // that axis's `name`, or its keys joined by "+"
  std::string label = {};          // that axis's label for this value ("" = show key=value)
  std::string override_text() const { return key + "=" + value; }
  // The value for people: strings without their quotes, tables as {key=value, ...}.
  std::string display_value() const;
};

// "router.kind=random workload.rate=20" ("(base)" when empty); an axis with labels shows as
// "name=label" once for all its keys.
std::string settings_label(const std::vector<Setting>& settings);
// The label of the configuration a point belongs to: its settings without the seed and the
// arrival-rate knobs (workload.rate, workload.rate_scale), which reports and capacity searches vary.
std::string configuration_label(const std::vector<Setting>& settings);

// One run of the sweep.
struct Point {
  int64_t index = 0;               // position in the expansion, from 0
  std::vector<Setting> settings;   // axis values in axis order, then "seed" when the experiment repeats seeds
  std::string key;                 // config_hash of the resolved configuration (its seed included); set by check()
  uint64_t seed = 0;               // set by check()
  bool skipped = false;            // infeasible = "skip" and the cluster cannot be built
  std::string skip_reason;
  // "router.kind=random workload.rate=20 seed=2"
  std::string label() const;
  // configuration_label(settings): "router.kind=random"
  std::string configuration() const;
};

// "point 3 (router.kind=random seed=2)": how errors name a point.
std::string point_context(const Point& p);

// One [[axis]]: one key (or several, zipped) and its values, optionally named and labelled:
//   name = "setup"                      # how labels show the axis (default: its keys)
//   labels = ["unified", "PD 2+2"]      # one per value, instead of key=value
struct Axis {
  std::string name;
  std::vector<std::string> keys;
  std::vector<std::vector<Setting>> steps;  // steps[i][k]: the value of keys[k] at step i
  core::SourceLocation where;
};

// [capacity]: settings of `servesim capacity`.
struct CapacitySpec {
  double target = 0.9;             // SLO attainment to sustain
  std::string knob;                // "" = workload.rate for generators, workload.rate_scale for traces
  std::optional<double> start;     // first probe (default: the configuration's own value of the knob)
  double min = 1e-3;               // give up below this value of the knob
  double max = 1e6;                // and above this one
  double tolerance = 0.02;         // stop when (lowest failing - highest passing) <= tolerance x highest passing
  int64_t max_probes = 40;         // per configuration
  std::optional<double> cheapest_at;  // cheapest-configuration mode: every configuration at this knob value
  bool require_stationary = true;  // a probe whose queue still grows fails, whatever its attainment
  double cliff_slope = 5;          // attainment falling faster than this many points per 1% more load: a cliff
  int64_t extend_up_to = 200000;   // a probe that meets the target but has not settled reruns with twice
                                   // workload.max_requests, up to this many requests (0: never)
  // N+1: "replica" or "node" searches every configuration twice, all up and with one replica (node
  // 0's replicas) down for the whole run (the "headroom" axis); "" = no headroom.
  std::string headroom;
  core::SourceLocation where;
};

class Experiment {
 public:
  // Reads and parses an experiment file; the points are expanded but not yet resolved (see check()).
  // Throws core::ConfigError naming file:line:column for anything malformed.
  static Experiment load(const std::string& path);
  // The same for text in memory; relative paths resolve against `base_dir`.
  static Experiment parse(const std::string& text, const std::string& source_name, const std::string& base_dir);

  const std::string& name() const { return name_; }
  const std::string& source_name() const { return source_name_; }
  const std::string& text() const { return text_; }
  const std::vector<Axis>& axes() const { return axes_; }
  // The seeds every configuration runs with; empty = the configuration's own seed.
  const std::vector<uint64_t>& seeds() const { return seeds_; }
  // replications = N: the seeds are N independent replications (0: none); capacity searches each
  // one and reports the interval across them.
  int64_t replications() const { return replications_; }
  // Whether those replications replay block bootstraps of a trace.
  bool replications_resample() const { return replication_resamples_; }
  const core::SourceLocation& seeds_where() const { return seeds_where_; }
  bool skip_infeasible() const { return skip_infeasible_; }
  // The base configuration's file ("" for an inline [base]).
  const std::string& base_file() const { return base_file_; }
  const CapacitySpec& capacity() const { return capacity_; }
  CapacitySpec& capacity() { return capacity_; }

  // N+1 sizing: adds the last axis, "headroom" (replacing one already there): every configuration
  // all up (a no-op fault event: replica 0 at full speed) and with one replica ("replica": replica 0) or
  // one node ("node": node 0) down from the start, paid for but serving nothing. "" removes it.
  void set_headroom(const std::string& kind, const core::SourceLocation& where);
  // The configurations: the product of the axes without the seeds (what a capacity search varies).
  std::vector<std::vector<Setting>> configurations() const;
  // Every point: configurations x seeds.
  const std::vector<Point>& points() const { return points_; }

  // The base configuration with `settings` applied like --set overrides, validated. A ConfigError
  // names the experiment file's line and column of the setting at fault (or the base file's), with
  // `context` ("point 3 (router.kind=random)") in front of the message.
  core::Params resolve(const std::vector<Setting>& settings, const std::string& context = "") const;
  // Re-locates a ConfigError raised while building a configuration resolved from `settings`.
  [[noreturn]] void rethrow_located(const core::ConfigError& e, const std::vector<Setting>& settings,
                                    const std::string& context) const;

  // Resolves every point and builds its components without running (in parallel, `jobs` threads;
  // 0 = all cores), filling each point's key and seed. Throws the error of the lowest-numbered
  // failing point; points that resolve to the same configuration are an error. With
  // infeasible = "skip", a point whose cluster cannot be built is marked skipped instead.
  void check(int jobs);
  bool checked() const { return checked_; }

  // What identifies the experiment in a results database: 16 hex digits of FNV-1a 64 over every
  // point's key in order (after check()). Shards and re-runs of the same expansion share it.
  std::string identity() const;

 private:
  std::string name_;
  std::string source_name_;
  std::string text_;
  std::string base_dir_;
  // The base: a file (read once) or an inline [base] table applied as settings over nothing.
  std::string base_file_;
  std::string base_text_;
  std::string base_source_;
  std::string base_dir_of_base_;
  core::SourceLocation base_where_;
  std::vector<Setting> base_settings_;  // inline [base] leaves, then [set] leaves
  std::vector<Axis> axes_;
  std::vector<uint64_t> seeds_;
  int64_t repetitions_ = 0;
  int64_t replications_ = 0;           // replications = N (then repetitions_ = N too)
  bool replication_resamples_ = false; // and the base replays a trace: its points resample it
  core::SourceLocation seeds_where_;
  bool skip_infeasible_ = false;
  CapacitySpec capacity_;
  std::vector<Point> points_;
  bool checked_ = false;

  void expand();
};

// A double as TOML text that reads back as a float ("20.0", "0.1").
std::string toml_float(double v);
// The declared parameter a dotted key ("workload.rate") names in a resolved configuration, or nullptr.
const core::ParamSpec* find_param_spec(const core::Params& config, const std::string& key);
// The value of a dotted float (or integer) key of a resolved configuration; nullopt when unset.
std::optional<double> get_number(const core::Params& config, const std::string& key);

// The number of threads for --jobs N (0 = the machine's cores); throws core::UsageError for a
// negative value or more than kMaxJobs.
inline constexpr int kMaxJobs = 1024;
int resolve_jobs(int jobs);

// Refuses (core::UsageError) a results database that is one of the files an experiment reads: the
// experiment file, its base, or a file its first point names. Checked points only.
void check_experiment_outputs(const Experiment& experiment, const std::string& experiment_path,
                              const std::string& db_path);

}  // namespace servesim::experiments
