#pragma once
// A router built from an inline [router] table, as a run configuration builds it.

#include <memory>
#include <string>
#include <vector>

#include "policies/router/router.h"
#include "sim/core/config.h"

namespace servesim::testing {

// `toml` is the body of a [router] table ("kind = \"random\"\n...").
inline std::unique_ptr<sim::Router> make_router(const std::string& toml, uint64_t seed = 1) {
  static const std::vector<core::ParamSpec> schema = {core::ParamSpec::section("router", "routers", "round_robin", "r")};
  core::Params cfg = core::parse_config("[router]\n" + toml, "t.toml", schema);
  return policies::router_registry().make(cfg.section("router"), seed);
}

}  // namespace servesim::testing
