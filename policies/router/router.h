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

// The load rule of least_outstanding and power_of_two: whether `a` is less loaded than `b`. By what
// a real router observes: fewer outstanding requests (queued + running), then fewer prompt tokens
// waiting to be prefilled. With `oracle`: less exact remaining work (needs output lengths).
bool lighter(const sim::ReplicaLoad& a, const sim::ReplicaLoad& b, bool oracle);
// The `oracle` parameter those routers declare.
core::ParamSpec oracle_param();

}  // namespace servesim::policies
