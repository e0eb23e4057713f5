// target_utilisation: keep the requests in the system (queued + running) per serving replica near a
// target, as Kubernetes HPA keeps a metric per pod near its target (desired = ceil(total / target),
// no change within a tolerance of the current count) and Knative's concurrency target does.
#include <cmath>

#include "policies/autoscaler/autoscaler.h"

namespace servesim::policies {
namespace {

using core::ParamSpec;

class TargetUtilisation final : public sim::Autoscaler {
 public:
  TargetUtilisation(double target, double tolerance) : target_(target), tolerance_(tolerance) {}
  int64_t desired(const sim::FleetView& v) override {
    double total = 0;
    for (size_t i = 0; i < v.loads.size(); ++i)
      if (v.phases[i] == sim::ReplicaPhase::kUp) total += static_cast<double>(v.loads[i].queued + v.loads[i].running);
    const double current = static_cast<double>(v.current);
    if (std::abs(total / (current * target_) - 1.0) <= tolerance_) return v.current;
    return static_cast<int64_t>(std::ceil(total / target_));
  }

 private:
  double target_, tolerance_;
};

const bool kRegistered = autoscaler_registry().add(
    {"target_utilisation",
     "keep the requests in the system (queued + running) per replica near target_requests: desired = "
     "ceil(requests on the replicas up / target_requests), unchanged within tolerance of the current count",
     autoscaler_params({
         ParamSpec::real("target_requests", 32, "requests", "requests in the system per replica to aim for")
             .range(1e-3, 1e9)
             .required(),
         ParamSpec::real("tolerance", 0.1, "fraction",
                         "no change while requests / (current x target) is within 1 +- tolerance (HPA's 0.1)")
             .range(0, 10),
     })},
    [](const core::Params& p) {
      return std::make_unique<TargetUtilisation>(p.get_float("target_requests"), p.get_float("tolerance"));
    });

}  // namespace
}  // namespace servesim::policies
