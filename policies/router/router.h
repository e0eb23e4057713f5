#pragma once
// Routers: the global policy that sends each arriving request to a replica. The interface is
// sim::Router (sim/cluster/cluster.h); implementations sit beside this header, one per .cc, and
// register themselves in router_registry().

#include <cstdint>

#include "sim/cluster/cluster.h"
#include "sim/core/params.h"

namespace servesim::policies {

// Family "routers". Factory arguments: the run seed (for randomised routers).
using RouterRegistry = core::Registry<sim::Router, uint64_t>;
RouterRegistry& router_registry();

}  // namespace servesim::policies
