#pragma once
// Request classes (issue 17): what kind of user a request comes from. A workload may define classes
// ([[workload.classes]]); each request then carries the index of its class (Request::request_class,
// RequestRecord::request_class). Plain values, so that the cluster, the admission policies and the
// metrics need nothing of traces/. Runs without classes have none, and every request is class 0.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace servesim::core {

struct RequestClass {
  std::string name;
  double share = 0;          // its share of a generator's requests (relative weight); 0 = unset
  int64_t priority = 0;      // lower = more important (vLLM's convention); ties by arrival
  std::string tenant;        // who pays for it ("" = none given)
  std::optional<double> ttft_slo_ms;  // its own SLO limits (unset: the run's [slo])
  std::optional<double> tpot_slo_ms;
  double admit_fraction = 1; // admission control: the class is shed once the load reaches this
                             // fraction of the limit ([admission]); 1 = only at the limit itself
  double weight = 1;         // its tenant's weight under fair sharing (the classes of a tenant agree)
};

using RequestClasses = std::vector<RequestClass>;

// Each class's tenant (Request::tenant): tenants numbered from 0 in the order their first class is
// defined; a class that names none is a tenant of its own.
inline std::vector<uint16_t> class_tenants(const RequestClasses& classes) {
  std::vector<std::string> tenants;
  std::vector<uint16_t> out;
  for (const RequestClass& c : classes) {
    const std::string key = c.tenant.empty() ? "\x01class:" + c.name : c.tenant;
    auto it = std::find(tenants.begin(), tenants.end(), key);
    if (it == tenants.end()) it = tenants.insert(tenants.end(), key);
    out.push_back(static_cast<uint16_t>(it - tenants.begin()));
  }
  return out;
}

// Each tenant's weight (numbered as class_tenants): its classes' weight.
inline std::vector<double> tenant_weights(const RequestClasses& classes) {
  const std::vector<uint16_t> tenant = class_tenants(classes);
  std::vector<double> out;
  for (size_t i = 0; i < classes.size(); ++i) {
    if (tenant[i] >= out.size()) out.resize(tenant[i] + size_t{1}, 1.0);
    out[tenant[i]] = classes[i].weight;
  }
  return out;
}

}  // namespace servesim::core
