#pragma once
// Request classes (issue 17): what kind of user a request comes from. A workload may define classes
// ([[workload.classes]]); each request then carries the index of its class (Request::request_class,
// RequestRecord::request_class). Plain values, so that the cluster, the admission policies and the
// metrics need nothing of traces/. Runs without classes have none, and every request is class 0.

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
};

using RequestClasses = std::vector<RequestClass>;

}  // namespace servesim::core
