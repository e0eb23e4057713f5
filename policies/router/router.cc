#include "policies/router/router.h"

namespace servesim::policies {

RouterRegistry& router_registry() {
  static RouterRegistry registry("routers", "global policies that pick a replica for each request");
  return registry;
}

bool lighter(const sim::ReplicaLoad& a, const sim::ReplicaLoad& b, bool oracle) {
  if (a.up != b.up) return a.up;  // a replica that is down ([faults]) comes last
  if (oracle) return a.oracle_remaining_tokens < b.oracle_remaining_tokens;
  const int64_t ra = a.queued + a.running, rb = b.queued + b.running;
  if (ra != rb) return ra < rb;
  return a.prefill_tokens_waiting < b.prefill_tokens_waiting;
}

core::ParamSpec oracle_param() {
  return core::ParamSpec::boolean(
      "oracle", false,
      "oracle upper bound: rank replicas by their exact remaining work (prompt tokens not prefilled + "
      "output tokens not generated), which needs output lengths no real router knows");
}

}  // namespace servesim::policies
