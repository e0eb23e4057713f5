#include "policies/router/router.h"

namespace servesim::policies {

RouterRegistry& router_registry() {
  static RouterRegistry registry("routers", "global policies that pick a replica for each request");
  return registry;
}

}  // namespace servesim::policies
