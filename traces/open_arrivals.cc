// Arrival kinds of one open-loop stage: poisson, gamma, constant, poisson_fixed_count, offline.
// Their send times are fixed in advance (they do not listen to completions).

#include <memory>

#include "traces/staged_process.h"

namespace servesim::traces {
namespace {

using core::ParamSpec;

ParamSpec rate_spec() {
  return ParamSpec::real("rate", 1, "req/s", "mean arrival rate").above(0).range(0, 1e9).required();
}

std::unique_ptr<ArrivalProcess> one_stage(const StageSpec& spec, uint64_t seed) {
  return std::make_unique<StagedProcess>(std::vector<StageSpec>{spec}, false, core::Duration(), seed,
                                         stage_type_name(spec.type));
}

const bool kPoisson = arrival_registry().add(
    {"poisson",
     "a Poisson process: exponential gaps at `rate`, the first send one gap after time 0; stops after `requests` "
     "sends or at `duration_s`, whichever comes first",
     {rate_spec(), requests_spec(false), duration_spec(false)}},
    [](const core::Params& p, uint64_t seed) {
      StageSpec s;
      s.type = StageType::kPoisson;
      s.rate = p.get_float("rate");
      read_limits(p, s, true);
      return one_stage(s, seed);
    });

const bool kGamma = arrival_registry().add(
    {"gamma",
     "gamma-distributed gaps of mean 1/rate and coefficient of variation `cv` (1 = Poisson, > 1 bursty; vllm bench "
     "serve's --burstiness is 1/cv^2); stops after `requests` sends or at `duration_s`",
     {rate_spec(),
      ParamSpec::real("cv", 1, "", "coefficient of variation of the gaps").above(0).range(0, 1e3).required(),
      requests_spec(false), duration_spec(false)}},
    [](const core::Params& p, uint64_t seed) {
      StageSpec s;
      s.type = StageType::kGamma;
      s.rate = p.get_float("rate");
      s.cv = p.get_float("cv");
      read_limits(p, s, true);
      return one_stage(s, seed);
    });

const bool kConstant = arrival_registry().add(
    {"constant",
     "evenly spaced sends, request i at i / rate (the first at time 0; GuideLLM's constant rate); stops after "
     "`requests` sends or before `duration_s`",
     {rate_spec(), requests_spec(false), duration_spec(false)}},
    [](const core::Params& p, uint64_t seed) {
      StageSpec s;
      s.type = StageType::kConstant;
      s.rate = p.get_float("rate");
      read_limits(p, s, true);
      return one_stage(s, seed);
    });

const bool kFixedCount = arrival_registry().add(
    {"poisson_fixed_count",
     "Poisson arrivals with a fixed count: N = round(rate x duration_s) exponential gaps rescaled so that they sum "
     "to duration_s (inference-perf's \"constant\" load type); the last send is at duration_s",
     {rate_spec(), duration_spec(true)}},
    [](const core::Params& p, uint64_t seed) {
      StageSpec s;
      s.type = StageType::kPoissonFixedCount;
      s.rate = p.get_float("rate");
      s.duration_s = p.get_float("duration_s");
      check_fixed_count(p, "rate", s.rate, *s.duration_s);
      return one_stage(s, seed);
    });

const bool kOffline = arrival_registry().add(
    {"offline",
     "every request sent at time 0 (offline batch inference: the cluster's maximum throughput)",
     {requests_spec(true)}},
    [](const core::Params& p, uint64_t seed) {
      StageSpec s;
      s.type = StageType::kOffline;
      s.count = p.get_int("requests");
      return one_stage(s, seed);
    });

}  // namespace
}  // namespace servesim::traces
