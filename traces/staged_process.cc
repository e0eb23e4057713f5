#include "traces/staged_process.h"

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"
#include "sim/core/format.h"
#include "traces/workload_common.h"

namespace servesim::traces {

namespace {
constexpr double kMaxClockS = 9.2e9;  // int64 nanoseconds hold 292 years
}

const char* stage_type_name(StageType type) {
  switch (type) {
    case StageType::kPoisson: return "poisson";
    case StageType::kGamma: return "gamma";
    case StageType::kConstant: return "constant";
    case StageType::kPoissonFixedCount: return "poisson_fixed_count";
    case StageType::kOffline: return "offline";
  }
  return "?";
}

StageTimer::StageTimer(const StageSpec& spec, core::Rng rng) : spec_(spec), rng_(rng) {
  switch (spec_.type) {
    case StageType::kPoissonFixedCount: {
      total_ = std::llround(spec_.rate * *spec_.duration_s);
      // First pass over a copy of the stream: the sum of the gaps, so that the second pass (the
      // same draws) can rescale each running sum to the duration without holding the gaps.
      core::Rng first = rng_;
      for (int64_t i = 0; i < total_; ++i) sum_s_ += first.exponential(spec_.rate);
      break;
    }
    case StageType::kConstant:
      if (spec_.duration_s) {
        // The offsets i / rate in [0, duration): about rate x duration of them, settled exactly on
        // the same division next() makes.
        const double d = *spec_.duration_s;
        const double n = std::ceil(spec_.rate * d);
        total_ = static_cast<int64_t>(std::min(n, 9.0e18));
        if (n < 1e15) {  // exact below 2^53: a step or two from the product's rounding
          while (total_ > 0 && !(static_cast<double>(total_ - 1) / spec_.rate < d)) --total_;
          while (static_cast<double>(total_) / spec_.rate < d) ++total_;
        }
        if (spec_.count) total_ = std::min(total_, *spec_.count);
      } else {
        total_ = *spec_.count;
      }
      break;
    case StageType::kOffline: total_ = *spec_.count; break;
    default: break;
  }
}

bool StageTimer::next(double& offset_s) {
  if (spec_.count && sent_ >= *spec_.count) return false;
  switch (spec_.type) {
    case StageType::kPoisson:
    case StageType::kGamma: {
      const double gap = spec_.type == StageType::kPoisson
                             ? rng_.exponential(spec_.rate)
                             : rng_.gamma(1.0 / (spec_.cv * spec_.cv), spec_.cv * spec_.cv / spec_.rate);
      clock_s_ += gap;
      if (spec_.duration_s && !(clock_s_ < *spec_.duration_s)) return false;
      offset_s = clock_s_;
      break;
    }
    case StageType::kConstant:
      if (sent_ >= total_) return false;
      offset_s = static_cast<double>(sent_) / spec_.rate;
      break;
    case StageType::kPoissonFixedCount: {
      if (sent_ >= total_) return false;
      clock_s_ += rng_.exponential(spec_.rate);
      // The last running sum equals the first pass's total (the same additions in the same order):
      // the last send is at exactly the duration.
      offset_s = *spec_.duration_s * (clock_s_ / sum_s_);
      break;
    }
    case StageType::kOffline:
      if (sent_ >= total_) return false;
      offset_s = 0;
      break;
  }
  ++sent_;
  return true;
}

StagedProcess::StagedProcess(std::vector<StageSpec> stages, bool drain, core::Duration interval, uint64_t seed,
                             std::string name)
    : stages_(std::move(stages)), drain_(drain), interval_(interval), seed_(seed), name_(std::move(name)) {}

std::optional<Send> StagedProcess::peek() {
  if (pending_) return pending_;
  while (stage_ < stages_.size()) {
    if (waiting_drain_) return std::nullopt;
    const StageSpec& spec = stages_[stage_];
    if (!timer_) {
      // One stream per stage, so that changing one stage leaves the others' draws alone; a lone
      // stage uses the generators' stream name.
      const std::string stream = stages_.size() == 1 ? std::string("arrivals")
                                                     : "arrivals/stage" + std::to_string(stage_);
      timer_.emplace(spec, core::Rng(seed_, stream));
    }
    double offset_s = 0;
    if (timer_->next(offset_s)) {
      int64_t t = 0;
      if (!(offset_s < kMaxClockS) ||
          __builtin_add_overflow(start_ns_, core::Duration::from_seconds(offset_s).ns(), &t))
        throw core::Error(name_ + " arrivals: the clock passed the int64 nanosecond limit (292 years)");
      last_send_ns_ = std::max(last_send_ns_, t);
      pending_ = Send{core::Time::from_ns(t), static_cast<uint32_t>(stage_)};
      return pending_;
    }
    // The stage has sent everything: it ends when its duration is over (or at its last send).
    timer_.reset();
    end_ns_ = last_send_ns_;
    if (spec.duration_s) {
      int64_t end = 0;
      if (__builtin_add_overflow(start_ns_, core::Duration::from_seconds(*spec.duration_s).ns(), &end))
        throw core::Error(name_ + " arrivals: the clock passed the int64 nanosecond limit (292 years)");
      end_ns_ = std::max(end_ns_, end);
    }
    ++stage_;
    if (stage_ == stages_.size()) break;
    if (drain_) {
      waiting_drain_ = true;
      start_next_after_drain();
    } else if (__builtin_add_overflow(end_ns_, interval_.ns(), &start_ns_)) {
      throw core::Error(name_ + " arrivals: the clock passed the int64 nanosecond limit (292 years)");
    }
  }
  return std::nullopt;
}

void StagedProcess::take(uint64_t /*id*/) {
  pending_.reset();
  ++outstanding_;
}

void StagedProcess::request_done(uint64_t /*id*/, core::Time t) {
  --outstanding_;
  last_done_ = std::max(last_done_, t);
  start_next_after_drain();
}

void StagedProcess::start_next_after_drain() {
  if (!waiting_drain_ || outstanding_ > 0) return;
  waiting_drain_ = false;
  const int64_t from = std::max(end_ns_, last_done_.ns());
  if (__builtin_add_overflow(from, interval_.ns(), &start_ns_))
    throw core::Error(name_ + " arrivals: the clock passed the int64 nanosecond limit (292 years)");
}

core::ParamSpec requests_spec(bool required) {
  auto p = core::ParamSpec::integer("requests", 1, "requests", "requests to send").range(1, kMaxRequests);
  return required ? p.required() : p.optional();
}

core::ParamSpec duration_spec(bool required) {
  auto p = core::ParamSpec::real("duration_s", 1, "s", "send only during this long from the start")
               .above(0)
               .range(0, kMaxClockS);
  return required ? p.required() : p.optional();
}

void check_fixed_count(const core::Params& p, std::string_view key, double rate, double duration_s) {
  const double n = rate * duration_s;
  if (n > static_cast<double>(kMaxFixedCount))
    p.fail(key, "rate x duration = " + core::format_double(n) + " requests; a fixed-count stage draws all its gaps "
                "before its first send, so at most " + std::to_string(kMaxFixedCount) + " are allowed");
}

void read_limits(const core::Params& p, StageSpec& spec, bool need_one) {
  if (p.has("requests")) spec.count = p.get_int("requests");
  if (p.has("duration_s")) spec.duration_s = p.get_float("duration_s");
  if (need_one && !spec.count && !spec.duration_s)
    p.fail("requests", "give requests or duration_s (or both: whichever ends first), otherwise it never ends");
}

}  // namespace servesim::traces
