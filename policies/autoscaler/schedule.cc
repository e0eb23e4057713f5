// schedule: the replica count as a step function of time, from the config (a scheduled scale-up
// before a known daily peak). The count of times_s[k] holds from the first evaluation at or after
// times_s[k] on; before the first time, the count the pool started with.
#include <cmath>
#include <string>
#include <vector>

#include "policies/autoscaler/autoscaler.h"
#include "sim/core/format.h"

namespace servesim::policies {
namespace {

using core::ParamSpec;

class ScheduleAutoscaler final : public sim::Autoscaler {
 public:
  ScheduleAutoscaler(std::vector<int64_t> times_ns, std::vector<int64_t> counts)
      : times_ns_(std::move(times_ns)), counts_(std::move(counts)) {}
  int64_t desired(const sim::FleetView& v) override {
    int64_t want = -1;
    for (size_t k = 0; k < times_ns_.size() && times_ns_[k] <= v.now.ns(); ++k) want = counts_[k];
    return want < 0 ? v.current : want;
  }

 private:
  std::vector<int64_t> times_ns_, counts_;
};

const bool kRegistered = autoscaler_registry().add(
    {"schedule",
     "the replica count as a step function of time: replicas[k] from times_s[k] on (taking effect at the first "
     "evaluation at or after it)",
     autoscaler_params({
         ParamSpec::real_list("times_s", {}, "s", "when each count starts, increasing").range(0, 1e9).required(),
         ParamSpec::real_list("replicas", {}, "replicas", "the count from each time on (whole numbers)")
             .range(1, 4096)
             .required(),
     })},
    [](const core::Params& p) {
      const std::vector<double>& times = p.get_float_list("times_s");
      const std::vector<double>& counts = p.get_float_list("replicas");
      if (times.empty()) p.fail("times_s", "give at least one time");
      if (counts.size() != times.size())
        p.fail("replicas", "give one count per time: " + std::to_string(counts.size()) + " counts for " +
                               std::to_string(times.size()) + " times_s");
      std::vector<int64_t> t, c;
      for (size_t k = 0; k < times.size(); ++k) {
        if (k > 0 && !(times[k] > times[k - 1]))
          p.fail("times_s", "times must increase; " + core::format_double(times[k]) + " follows " +
                                core::format_double(times[k - 1]));
        if (counts[k] != std::floor(counts[k]))
          p.fail("replicas", "counts are whole replicas; got " + core::format_double(counts[k]));
        if (counts[k] < static_cast<double>(p.get_int("min_replicas")) ||
            counts[k] > static_cast<double>(p.get_int("max_replicas")))
          p.fail("replicas", "count " + core::format_double(counts[k]) + " is outside [min_replicas, max_replicas] = [" +
                                 std::to_string(p.get_int("min_replicas")) + ", " +
                                 std::to_string(p.get_int("max_replicas")) + "]");
        t.push_back(std::llround(times[k] * 1e9));
        c.push_back(static_cast<int64_t>(counts[k]));
      }
      return std::make_unique<ScheduleAutoscaler>(std::move(t), std::move(c));
    });

}  // namespace
}  // namespace servesim::policies
