#pragma once
// What every workload kind shares: the common parameters (time window, rate scaling, request limit,
// seed) and ShapedSource, which applies them to a kind's raw stream of arrivals.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/params.h"
#include "traces/arrival_source.h"
#include "traces/rate_profile.h"
#include "traces/request_classes.h"

namespace servesim::traces {

// The most requests one run simulates, and the latest window offset (s, source time; 95 years).
inline constexpr double kMaxRequests = 1e9;
inline constexpr double kMaxWindowS = 3e9;

// `own` followed by the common parameters: rate_scale, max_requests, window_start_s, window_end_s,
// seed, client_timeout_s, repetition, classes, rate_profile. Every trace and generator kind declares its list through this.
std::vector<core::ParamSpec> with_common_params(std::vector<core::ParamSpec> own);

// The declaration of `repetition` (speculative decoding's prompt lookup), which every workload kind
// takes, and its value (< 0 when unset: RequestSpec::repetition).
core::ParamSpec repetition_spec();
double read_repetition(const core::Params& p);
// The declaration of `client_timeout_s`, which every workload kind takes.
core::ParamSpec client_timeout_spec();
// The value of `client_timeout_s` (nullopt when unset).
std::optional<core::Duration> read_client_timeout(const core::Params& p);

// The workload's seed: its own `seed` when set, else the run's.
uint64_t workload_seed(const core::Params& p, uint64_t run_seed);

// The path under `key`, checked to be a readable regular file: a ConfigError at the key otherwise,
// so that a wrong path is reported at the line of the config that gave it, before anything runs.
std::string readable_file(const core::Params& p, std::string_view key);

// A kind produces raw arrivals (offsets in its own time, never decreasing); this base keeps those in
// [window_start_s, window_end_s), shifts them so the window starts at 0, divides by rate_scale,
// time-changes them through the rate profile when there is one (rate_profile.h) and stops after
// max_requests. A workload that yields no request at all is an error, never a silent
// empty run.
class ShapedSource : public ArrivalSource {
 public:
  bool next(RequestSpec& out) final;
  std::optional<core::Duration> client_timeout() const final { return client_timeout_; }
  const core::RequestClasses& classes() const final { return classes_.classes(); }

 protected:
  // `run_seed`: the run's seed (the workload's own `seed` wins), for drawing request classes.
  ShapedSource(const core::Params& p, uint64_t run_seed);
  // The classes, for trace readers that resolve a `class` field (nullptr without classes).
  const ClassAssigner* class_table() const { return classes_.empty() ? nullptr : &classes_; }
  // The next raw arrival; false at the end of the stream.
  virtual bool next_raw(RequestSpec& out) = 0;
  // Names the source in errors ("trace file x.csv", "poisson generator").
  virtual std::string describe() const = 0;

  // The end of the window in raw nanoseconds; INT64_MAX when open.
  int64_t window_end_ns() const { return window_end_ns_; }
  // `span_s` seconds of the unshaped workload (after rate_scale) in simulated seconds: through the
  // rate profile when there is one; 0 when the profile never reaches it.
  double shaped_span_s(double span_s) const;

 private:
  int64_t window_start_ns_ = 0;
  int64_t window_end_ns_ = 0;
  double rate_scale_ = 1.0;
  int64_t max_requests_ = 0;
  int64_t emitted_ = 0;
  double repetition_ = -1;  // every request's RequestSpec::repetition
  bool done_ = false;
  std::optional<core::Duration> client_timeout_;
  ClassAssigner classes_;
  std::unique_ptr<RateProfile> profile_;  // null: none
  int64_t last_shaped_ns_ = 0;
};

}  // namespace servesim::traces
