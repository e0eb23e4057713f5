// slo: scale so that the predicted TTFT of a new request stays under max_ttft_ms. The prediction is
// Admission predicted_ttft's (policies/router/admission.cc): the prompt tokens waiting to be prefilled
// at the replica's prefill rate (its cost model's GPU time of a chunk_tokens chunk, per token), here
// for the mean backlog of the replicas up plus a prompt of prompt_tokens. The count that brings it
// back to the limit is n = ceil(backlog of all replicas up / (limit - the prompt's own time)); below
// scale_down_below x the limit it wants one replica fewer than it has (so the stabilisation window
// and the next evaluations step the pool down one replica at a time).
#include <cmath>

#include "policies/autoscaler/autoscaler.h"
#include "policies/router/admission.h"
#include "sim/core/error.h"

namespace servesim::policies {
namespace {

using core::ParamSpec;

class SloAutoscaler final : public sim::Autoscaler {
 public:
  SloAutoscaler(double max_ttft_ms, double scale_down_below, int64_t prompt_tokens, int64_t chunk_tokens)
      : max_ttft_ms_(max_ttft_ms), down_below_(scale_down_below), prompt_(prompt_tokens), chunk_(chunk_tokens) {}
  void bind(std::span<sim::Replica* const> replicas) override {
    // The pool's replicas are alike: one rate serves them all.
    ms_per_token_ = prefill_ms_per_token(*replicas.front(), chunk_);
  }
  int64_t desired(const sim::FleetView& v) override {
    double waiting = 0;
    for (size_t i = 0; i < v.loads.size(); ++i)
      if (v.phases[i] == sim::ReplicaPhase::kUp) waiting += static_cast<double>(v.loads[i].prefill_tokens_waiting);
    const double backlog_ms = waiting * ms_per_token_;
    const double prompt_ms = static_cast<double>(prompt_) * ms_per_token_;
    const double predicted_ms = backlog_ms / static_cast<double>(v.up) + prompt_ms;
    // Inside the band [scale_down_below x limit, limit]: no change.
    if (predicted_ms <= max_ttft_ms_ && predicted_ms >= down_below_ * max_ttft_ms_) return v.current;
    if (predicted_ms < down_below_ * max_ttft_ms_) {
      // A backlog far under the limit says little about how many replicas the load needs (none
      // builds up until too few are left): one fewer at a time, the window and the next
      // evaluations deciding whether to go on.
      return static_cast<int64_t>(v.current) - 1;
    }
    if (prompt_ms >= max_ttft_ms_) return INT32_MAX;
    return std::max<int64_t>(v.current + 1, static_cast<int64_t>(std::ceil(backlog_ms / (max_ttft_ms_ - prompt_ms))));
  }

 private:
  double max_ttft_ms_, down_below_;
  int64_t prompt_, chunk_;
  double ms_per_token_ = 0;
};

const bool kRegistered = autoscaler_registry().add(
    {"slo",
     "scale up when the predicted TTFT of a new request (the mean prefill backlog of the replicas up plus "
     "prompt_tokens, at the replicas' prefill rate, as admission predicted_ttft predicts it) exceeds max_ttft_ms, "
     "to the count that brings it back under (at least one more); one replica fewer when it is below "
     "scale_down_below x max_ttft_ms",
     autoscaler_params({
         ParamSpec::real("max_ttft_ms", 1000, "ms", "the predicted TTFT above which the pool scales up")
             .range(1e-3, 1e10)
             .required(),
         ParamSpec::real("scale_down_below", 0.5, "fraction",
                         "scale down when the prediction is below this fraction of max_ttft_ms")
             .range(0, 1),
         ParamSpec::integer("prompt_tokens", 512, "tokens", "the prompt of the new request the prediction is for")
             .range(0, 1 << 24),
         ParamSpec::integer("chunk_tokens", 2048, "tokens",
                            "the prefill chunk whose GPU time per token is the replicas' prefill rate")
             .range(1, 1 << 20),
     })},
    [](const core::Params& p) {
      return std::make_unique<SloAutoscaler>(p.get_float("max_ttft_ms"), p.get_float("scale_down_below"),
                                             p.get_int("prompt_tokens"), p.get_int("chunk_tokens"));
    });

}  // namespace
}  // namespace servesim::policies
