#include "traces/arrival_process.h"

namespace servesim::traces {

ArrivalRegistry& arrival_registry() {
  static ArrivalRegistry registry("arrivals",
                                  "when a composed workload (synthetic, shared_prefix) sends its requests: open-loop "
                                  "timers, load stages, closed-loop clients");
  return registry;
}

core::ParamSpec arrival_section_spec() {
  return core::ParamSpec::section("arrival", "arrivals", "",
                                  "when requests are sent: poisson, gamma, constant, poisson_fixed_count, offline, "
                                  "stages or closed_loop");
}

}  // namespace servesim::traces
