#pragma once
// Open-loop timers and the process that runs them as load stages, one after another: what the
// arrival kinds poisson, gamma, constant, poisson_fixed_count, offline (one stage each) and stages
// (a list, optionally waiting for each stage to drain) are made of.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/params.h"
#include "sim/core/rng.h"
#include "traces/arrival_process.h"

namespace servesim::traces {

enum class StageType : uint8_t {
  kPoisson,            // exponential gaps (the first send one gap after the start)
  kGamma,              // gamma gaps of coefficient of variation `cv`
  kConstant,           // evenly spaced: i / rate, from the start
  kPoissonFixedCount,  // N = round(rate x duration) exponential gaps rescaled to sum to the duration
                       // (inference-perf's "constant" load): the last send ends the stage
  kOffline,            // `count` sends at the start
};

// "poisson", "gamma", "constant", "poisson_fixed_count", "offline".
const char* stage_type_name(StageType type);

struct StageSpec {
  StageType type = StageType::kPoisson;
  double rate = 0;                    // req/s (not offline)
  double cv = 1;                      // gamma only
  std::optional<int64_t> count;       // sends at most this many
  std::optional<double> duration_s;   // sends only in [0, duration) after the stage starts (fixed
                                      // count: the stage lasts exactly this long)
};

// The send offsets of one stage, in seconds from its start, never decreasing.
class StageTimer {
 public:
  StageTimer(const StageSpec& spec, core::Rng rng);
  // The next offset; false when the stage has sent everything.
  bool next(double& offset_s);

 private:
  StageSpec spec_;
  core::Rng rng_;
  int64_t sent_ = 0;
  int64_t total_ = -1;     // fixed count, constant, offline: sends of the stage; -1 = until the duration
  double clock_s_ = 0;     // poisson, gamma: the last offset
  double sum_s_ = 0;       // fixed count: the sum of all gaps (first pass), then the running sum
};

// Stages one after another, each with its own random stream. Stage k + 1 starts `interval` after
// stage k ends (its duration is over, or, without one, its last send); with `drain`, not before
// every request of stage k has ended for its client either (inference-perf waits so).
class StagedProcess final : public ArrivalProcess {
 public:
  StagedProcess(std::vector<StageSpec> stages, bool drain, core::Duration interval, uint64_t seed,
                std::string name);

  std::optional<Send> peek() override;
  void take(uint64_t id) override;
  bool listens() const override { return drain_; }
  void request_done(uint64_t id, core::Time t) override;

 private:
  void start_next_after_drain();

  std::vector<StageSpec> stages_;
  bool drain_;
  core::Duration interval_;
  uint64_t seed_;
  std::string name_;
  size_t stage_ = 0;              // the stage sending now, or the next one
  std::optional<StageTimer> timer_;
  std::optional<Send> pending_;
  int64_t start_ns_ = 0;          // when stage_ starts (once it may start)
  int64_t end_ns_ = 0;            // when the previous stage ended
  int64_t last_send_ns_ = 0;
  bool waiting_drain_ = false;    // stage_ waits until the previous stage's requests have ended
  int64_t outstanding_ = 0;       // requests sent and not ended (drain only)
  core::Time last_done_;
};

// The parameters every open-loop timer kind shares: `requests` and `duration_s` (optional).
core::ParamSpec requests_spec(bool required);
core::ParamSpec duration_spec(bool required);
// A fixed-count stage draws all its gaps when it starts: rate x duration is limited to this.
constexpr int64_t kMaxFixedCount = 100'000'000;
// A ConfigError at `key` of `p` when rate x duration exceeds kMaxFixedCount.
void check_fixed_count(const core::Params& p, std::string_view key, double rate, double duration_s);
// The count and duration of `p` as a stage; a ConfigError when neither is given and one is needed.
void read_limits(const core::Params& p, StageSpec& spec, bool need_one);

}  // namespace servesim::traces
