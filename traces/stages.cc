// Arrival kind "stages": load stages run one after another, like inference-perf's load.stages. Each
// request carries its stage's index (RequestSpec::stage, kept in the requests table), so that
// metrics can be computed per stage.

#include <memory>

#include "sim/core/format.h"
#include "traces/staged_process.h"

namespace servesim::traces {
namespace {

using core::ParamSpec;

StageType parse_type(const std::string& name) {
  if (name == "poisson") return StageType::kPoisson;
  if (name == "constant") return StageType::kConstant;
  return StageType::kPoissonFixedCount;
}

const bool kRegistered = arrival_registry().add(
    {"stages",
     "load stages one after another, each at its own rate for its own duration; stage k + 1 starts interval_s "
     "after stage k's duration is over and, with drain, after every request of stage k has ended for its client "
     "(completed, failed or timed out), as inference-perf runs load.stages",
     {ParamSpec::table_list(
          "stages",
          {ParamSpec::real("rate", 1, "req/s", "the stage's arrival rate").above(0).range(0, 1e9).required(),
           ParamSpec::real("duration_s", 1, "s", "how long the stage sends").above(0).range(0, 9.2e9).required(),
           ParamSpec::string("type", "poisson_fixed_count",
                             "poisson_fixed_count: round(rate x duration) exponential gaps rescaled to the duration "
                             "(inference-perf's \"constant\"); poisson: exponential gaps during the duration; "
                             "constant: evenly spaced at i / rate")
               .one_of({"poisson_fixed_count", "poisson", "constant"})},
          "the load stages, in order"),
      ParamSpec::boolean("drain", true,
                         "start a stage only once every request of the previous one has ended for its client "
                         "(inference-perf waits so)"),
      ParamSpec::real("interval_s", 1.0, "s", "pause between stages (inference-perf's load.interval)")
          .range(0, 9.2e9)}},
    [](const core::Params& p, uint64_t seed) -> std::unique_ptr<ArrivalProcess> {
      std::vector<StageSpec> stages;
      for (const core::Params& e : p.list("stages")) {
        StageSpec s;
        s.type = parse_type(e.get_string("type"));
        s.rate = e.get_float("rate");
        s.duration_s = e.get_float("duration_s");
        if (s.type == StageType::kPoissonFixedCount) check_fixed_count(e, "rate", s.rate, *s.duration_s);
        stages.push_back(s);
      }
      return std::make_unique<StagedProcess>(std::move(stages), p.get_bool("drain"),
                                             core::Duration::from_seconds(p.get_float("interval_s")), seed,
                                             "stages");
    });

}  // namespace
}  // namespace servesim::traces
